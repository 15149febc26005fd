// Every Kafka client kleaf uses, one header per class (thin RAII wrappers over librdkafka, whose
// types stay private to kafka/*.cc): include the one you need, or this one for all of them.
#pragma once

#include "kafka/group_consumer.h"
#include "kafka/group_offsets.h"
#include "kafka/log_start.h"
#include "kafka/message.h"
#include "kafka/partition_reader.h"
#include "kafka/producer.h"
#include "kafka/recovery.h"
#include "kafka/topics.h"
#include "kafka/txn_producer.h"
