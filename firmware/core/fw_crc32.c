/* CRC-32 with a 16-entry table, a nibble at a time: 64 bytes of flash, ~2x8 steps a byte. */
#include "fw_crc32.h"

static const uint32_t nibble_table[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t fw_crc32_byte(uint32_t reg, uint8_t byte)
{
    reg ^= byte;
    reg = (reg >> 4) ^ nibble_table[reg & 0x0Fu];
    reg = (reg >> 4) ^ nibble_table[reg & 0x0Fu];
    return reg;
}

uint32_t fw_crc32(uint32_t crc, const uint8_t *data, uint32_t n)
{
    uint32_t reg = ~crc;
    for (uint32_t i = 0; i < n; i++) {
        reg = fw_crc32_byte(reg, data[i]);
    }
    return ~reg;
}
