package dispatch

// The topics of the dispatcher. Every record of one role goes to the
// partition that coordination.RolePartition picks for the role, in both
// topics, so a role's log and its requests are each one ordered partition.
const (
	// DefaultLogTopic is the default command log topic. It needs the delete
	// cleanup policy with a long retention (the log is the audit record),
	// replication 3 and min.insync.replicas 2.
	DefaultLogTopic = "dispatch.log"

	// DefaultRequestsTopic is the default topic that submitters write
	// commands to; the record key is the command ID and the value is
	// [EncodeRequest]'s encoding.
	DefaultRequestsTopic = "dispatch.requests"

	// DefaultTopicPartitions is the default partition count of both topics.
	// Every writer and reader of a cluster must use the count the topics
	// were created with, because the count picks the partition of a role.
	DefaultTopicPartitions = 16
)
