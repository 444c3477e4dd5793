package coordination

import (
	"strings"
	"testing"
)

// TestMurmur2 checks the hash against the vectors of Kafka's own test of
// Utils.murmur2, which cover every length of the tail.
func TestMurmur2(t *testing.T) {
	vectors := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for input, want := range vectors {
		if got := int32(murmur2([]byte(input))); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", input, got, want)
		}
	}
}

func TestRolePartition(t *testing.T) {
	controller := mustRole(t, "controller")
	tests := []struct {
		role       Role
		partitions int
		want       int
	}{
		{controller, 16, 12},
		{controller, 1, 0},
		// murmur2("21") is negative: toPositive masks the sign bit, where an
		// absolute value would give 973932308 % 16 = 4.
		{mustRole(t, "21"), 16, (-973932308 & 0x7fffffff) % 16},
		{mustRole(t, "foobar"), 3, (-790332482 & 0x7fffffff) % 3},
	}
	for _, tt := range tests {
		got, err := RolePartition(tt.role, tt.partitions)
		if err != nil || got != tt.want {
			t.Errorf("RolePartition(%s, %d) = %d, %v; want %d", tt.role, tt.partitions, got, err, tt.want)
		}
	}
	if got, _ := RolePartition(mustRole(t, "21"), 16); got == 973932308%16 {
		t.Fatal("the partition rule takes an absolute value")
	}
	for _, partitions := range []int{0, -1} {
		if _, err := RolePartition(controller, partitions); err == nil || !strings.Contains(err.Error(), "partition count") {
			t.Errorf("RolePartition with %d partitions: %v", partitions, err)
		}
	}
	if _, err := RolePartition(Role{}, 16); err == nil {
		t.Error("RolePartition of the zero role succeeded")
	}
}

func TestRoleTopicPartition(t *testing.T) {
	controller := mustRole(t, "controller")
	tp, err := RoleTopicPartition(controller)
	if err != nil || tp != (TopicPartition{Topic: StateTopic, Partition: 12}) {
		t.Fatalf("default: %+v, %v", tp, err)
	}
	tp, err = RoleTopicPartition(controller, WithTopic("coord.v2"), WithPartitions(1), WithPollInterval(5))
	if err != nil || tp != (TopicPartition{Topic: "coord.v2", Partition: 0}) {
		t.Fatalf("with options: %+v, %v", tp, err)
	}
	if _, err := RoleTopicPartition(controller, WithPartitions(-3)); err == nil || !strings.Contains(err.Error(), "-3") {
		t.Fatalf("bad partitions: %v", err)
	}
	if _, err := RoleTopicPartition(Role{}); err == nil {
		t.Fatal("zero role accepted")
	}
	if _, err := RoleTopicPartition(controller, nil); err != nil {
		t.Fatalf("a nil option: %v", err)
	}
}

func TestWithTopic(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a b", "topic/x", strings.Repeat("t", 250), "é"} {
		if _, err := RoleTopicPartition(mustRole(t, "r"), WithTopic(bad)); err == nil {
			t.Errorf("topic %q accepted", bad)
		}
	}
	for _, good := range []string{"a", "A-b_c.d", strings.Repeat("t", 249), "__coordination_state"} {
		if _, err := RoleTopicPartition(mustRole(t, "r"), WithTopic(good)); err != nil {
			t.Errorf("topic %q rejected: %v", good, err)
		}
	}
}
