/* The port interface: what a board must provide to run the InferLab firmware.
 *
 * Two byte functions and a tick are the whole contract (PORTING.md walks through them):
 *   fw_port_getc   - the next byte from the host; blocks until one arrives
 *   fw_port_putc   - one byte to the host
 *   fw_port_ticks  - a free-running 64-bit tick count at FW_PORT_TICK_HZ (port_config.h)
 * plus set-up (fw_port_init), an end-of-frame hint (fw_port_flush) and the memory limits
 * the port's linker script knows (fw_port_limits).
 */
#ifndef FW_PORT_H
#define FW_PORT_H

#include <stdint.h>

void fw_port_init(void);

/* The next byte from the host (0..255); blocks. A negative value means the input ended
 * (only the host port's stdin can end) and main() returns. */
int fw_port_getc(void);

void fw_port_putc(uint8_t byte);

/* Called after each whole frame: push out anything the port buffers. */
void fw_port_flush(void);

/* Ticks since start at FW_PORT_TICK_HZ, never wrapping in practice (64 bits). */
uint64_t fw_port_ticks(void);

/* The arena a plan may use (the static arena and whatever RAM lies free after it) and the
 * flash the code takes besides the model. `arena_capacity` is the static arena's size. */
void fw_port_limits(uint32_t arena_capacity, uint32_t *arena_limit_bytes,
                    uint32_t *code_bytes);

#endif
