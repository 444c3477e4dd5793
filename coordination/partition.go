package coordination

import (
	"encoding/binary"
	"fmt"
)

// TopicPartition identifies one partition of one topic. This package declares
// its own copy, because it depends on no other package of this library.
type TopicPartition struct {
	// Topic is the topic name.
	Topic string

	// Partition is the partition number.
	Partition int
}

// RolePartition returns the partition of [StateTopic] that holds every record
// of role. It rejects a partition count below one, and the zero [Role].
//
// The rule is Kafka's own key partitioning: murmur2 of the role name in UTF-8,
// masked with Utils.toPositive, and then the remainder of partitions. The
// mask clears the sign bit. It is not an absolute value, and the two differ
// for every negative hash. krabka-client-rs and krabka-streams-java write the
// same topic, so they compute the same rule. A change here needs the same
// change in the two ports.
//
// Both writers of a role pin the partition with this rule. The pin is a
// correctness requirement and not a preference. Kafka's default partitioner
// hashes the record key. The registration key of a role and the lease key of
// the same role differ, because the registration key names a member and the
// lease key does not. A partitioner that reads the key puts the two kinds in
// two partitions, and the total order that the succession rules rank on is
// gone.
func RolePartition(role Role, partitions int) (int, error) {
	if partitions < 1 {
		return 0, fmt.Errorf("coordination: partition count %d is below one", partitions)
	}
	if role.name == "" {
		return 0, fmt.Errorf("coordination: role is empty")
	}
	hash := int64(murmur2([]byte(role.name)) & 0x7fffffff)
	return int(hash % int64(partitions)), nil
}

// RoleTopicPartition returns the partition of the coordination topic that
// holds every record of the role. Only [WithTopic] and [WithPartitions] change
// the answer; the other options are validated all the same, so one option list
// serves every call of this package.
func RoleTopicPartition(role Role, options ...Option) (TopicPartition, error) {
	s, err := newSettings(options)
	if err != nil {
		return TopicPartition{}, err
	}
	return s.topicPartition(role)
}

// murmur2 is the 32-bit hash that Kafka's Utils.murmur2 computes, bit for bit:
// seed 0x9747b28c, little-endian blocks of four bytes, and a tail that falls
// through from three bytes to one.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	length := len(data)
	h := uint32(seed) ^ uint32(length)
	blocks := length / 4
	for i := 0; i < blocks; i++ {
		k := binary.LittleEndian.Uint32(data[i*4:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[blocks*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
