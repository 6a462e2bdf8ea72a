/* CRC-32/IEEE (zlib): reflected polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF. */
#ifndef FW_CRC32_H
#define FW_CRC32_H

#include <stdint.h>

#define FW_CRC32_INIT 0xFFFFFFFFu

/* One byte into a running register (start at FW_CRC32_INIT, finish with ~reg). */
uint32_t fw_crc32_byte(uint32_t reg, uint8_t byte);

/* CRC-32 of `n` bytes, continuing from a previous result `crc` (0 to start). */
uint32_t fw_crc32(uint32_t crc, const uint8_t *data, uint32_t n);

#endif
