/* COBS (Cheshire and Baker 1999), streamed: frames are decoded byte by byte as they
 * arrive and encoded straight to the port, so neither side needs a second buffer. */
#ifndef FW_COBS_H
#define FW_COBS_H

#include <stdint.h>

typedef void (*fw_sink_t)(void *ctx, uint8_t byte);

/* Write the COBS encoding of data[0..n) to `sink` (no 0x00 delimiter). */
void fw_cobs_encode(const uint8_t *data, uint32_t n, fw_sink_t sink, void *ctx);

/* A decoder for the bytes between two 0x00 delimiters. */
typedef struct {
    uint8_t left;    /* data bytes still due in the current block */
    uint8_t code;    /* the current block's code byte */
    uint8_t started; /* any byte seen since the last reset */
} fw_cobs_dec_t;

void fw_cobs_dec_reset(fw_cobs_dec_t *d);

/* Feed one non-zero byte; returns the decoded byte it yields (0..255) or -1 for none. */
int fw_cobs_dec_byte(fw_cobs_dec_t *d, uint8_t c);

/* At a delimiter: 1 when the bytes fed form whole blocks (a valid encoding). */
int fw_cobs_dec_complete(const fw_cobs_dec_t *d);

/* Helpers for tests: encode/decode whole buffers; decode returns the length, or -1. */
uint32_t fw_cobs_encode_buffer(const uint8_t *data, uint32_t n, uint8_t *out);
int32_t fw_cobs_decode_buffer(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);

#endif
