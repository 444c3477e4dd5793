package coordination

// TopicPartition identifies one partition of one topic. This package declares
// its own copy, because it depends on no other package of this library.
type TopicPartition struct {
	// Topic is the topic name.
	Topic string

	// Partition is the partition number.
	Partition int
}
