// The librdkafka objects kleaf owns, each held by base/handle.h's Handle<T, Destroy> with
// librdkafka's destroy function for T. Private to kafka/ and its tests, like librdkafka.
#pragma once

#include <librdkafka/rdkafka.h>

#include "base/handle.h"

namespace kleaf::kafka {

// A consumer destroyed without its group leave: it was closed already, or the close was given up
// (the coordinator drops the member at its session timeout).
inline void DestroyWithoutConsumerClose(rd_kafka_t* rk) {
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

using KafkaHandle = Handle<rd_kafka_t, rd_kafka_destroy>;
using ConfHandle = Handle<rd_kafka_conf_t, rd_kafka_conf_destroy>;
using PartitionList =
    Handle<rd_kafka_topic_partition_list_t, rd_kafka_topic_partition_list_destroy>;
using TopicHandle = Handle<rd_kafka_topic_t, rd_kafka_topic_destroy>;
using MessageHandle = Handle<rd_kafka_message_t, rd_kafka_message_destroy>;
using MetadataHandle = Handle<const rd_kafka_metadata_t, rd_kafka_metadata_destroy>;
using HeadersHandle = Handle<rd_kafka_headers_t, rd_kafka_headers_destroy>;
using ErrorHandle = Handle<rd_kafka_error_t, rd_kafka_error_destroy>;
using EventHandle = Handle<rd_kafka_event_t, rd_kafka_event_destroy>;
using QueueHandle = Handle<rd_kafka_queue_t, rd_kafka_queue_destroy>;
using AdminOptionsHandle = Handle<rd_kafka_AdminOptions_t, rd_kafka_AdminOptions_destroy>;
using TopicCollectionHandle = Handle<rd_kafka_TopicCollection_t, rd_kafka_TopicCollection_destroy>;
using NewTopicHandle = Handle<rd_kafka_NewTopic_t, rd_kafka_NewTopic_destroy>;
using ConfigResourceHandle = Handle<rd_kafka_ConfigResource_t, rd_kafka_ConfigResource_destroy>;
using DeleteTopicHandle = Handle<rd_kafka_DeleteTopic_t, rd_kafka_DeleteTopic_destroy>;
using GroupMetadataHandle =
    Handle<rd_kafka_consumer_group_metadata_t, rd_kafka_consumer_group_metadata_destroy>;

}  // namespace kleaf::kafka
