/* The board end of InferLab's wire protocol v1 (engines/board/PROTOCOL.md) for a firmware
 * with a compiled-in model: HELLO, PLAN, INPUT, RUN, READ_OUTPUT, READ_TIMINGS; LOAD_* are
 * answered UNSUPPORTED (the model lives in flash; rebuild to change it).
 *
 * Frames are COBS-decoded as bytes arrive, into ONE buffer of 12 + FW_MAX_PAYLOAD bytes
 * that also holds the answer, so the protocol's RAM is that buffer and a few counters.
 */
#ifndef FW_SERVER_H
#define FW_SERVER_H

#include <stdint.h>

#include "fw_cobs.h"
#include "fw_model.h"

#ifndef FW_MAX_PAYLOAD
#define FW_MAX_PAYLOAD 1024
#endif

#define FW_PROTOCOL_VERSION 1
#define FW_MAGIC 0x49
#define FW_HEADER_BYTES 8
#define FW_CRC_BYTES 4
#define FW_PROTOCOL_MAX_PAYLOAD 4096

/* What HELLO says about the board (filled by main() from the build's board_config.h and
 * the port's limits). */
typedef struct {
    const char *id;   /* board preset id, e.g. "nrf52840" */
    const char *name; /* human name */
    const char *core; /* e.g. "Cortex-M4" */
    uint32_t sram_bytes, flash_bytes, clock_hz;
    uint32_t arena_limit_bytes; /* SRAM a plan's arena may use */
    uint32_t model_limit_bytes; /* flash left for a model: flash - code */
    uint8_t cycles_measured;    /* ticks come from a cycle counter (SysTick, DWT) */
} fw_board_t;

typedef struct {
    const fw_model_t *model;
    const fw_board_t *board;
    /* receiving */
    fw_cobs_dec_t cobs;
    uint32_t n;   /* decoded bytes of the current frame (may pass the buffer) */
    uint32_t crc; /* running CRC register over all but the last 4 bytes */
    uint8_t tail[4];
    /* state */
    uint32_t arena_bytes; /* of the active plan */
    uint32_t plan_arena_bytes;
    uint16_t plan_received;
    uint16_t run_seq;
    uint8_t plan_open, input_staged, input_persists, input_clobbers_output;
    uint8_t result_valid, run_seq_valid;
    uint64_t result_ticks;
    uint8_t buf[FW_HEADER_BYTES + FW_MAX_PAYLOAD + FW_CRC_BYTES];
} fw_server_t;

void fw_server_init(fw_server_t *s, const fw_model_t *model, const fw_board_t *board);

/* One byte from the line; answers go out through fw_port_putc as frames complete. */
void fw_server_feed(fw_server_t *s, uint8_t byte);

#endif
