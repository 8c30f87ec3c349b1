// trace/crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the masked form that
// TFRecord framing stores (TensorBoard event files: trace/event_file_writer.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe4d {

// CRC-32C of data[size] (initial value ~0, final xor ~0: crc32c("123456789") = 0xE3069283).
uint32_t crc32c(const void* data, size_t size);
// TFRecord's mask: rotate right by 15 bits and add 0xa282ead8, so that a CRC of data that itself
// holds CRCs stays well distributed.
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace moe4d
