/* InferLab board firmware: one compiled-in model, served over the wire protocol.
 *
 * board_config.h (written by `inferlab board build` next to model.c) names the board
 * preset; port_config.h (one per port) gives the tick clock and the core.
 */
#include "board_config.h"
#include "fw_port.h"
#include "fw_server.h"
#include "model.h"
#include "port_config.h"

static fw_server_t server;
static fw_board_t board;

int main(void)
{
    fw_port_init();
    board.id = FW_BOARD_ID;
    board.name = FW_BOARD_NAME;
    board.core = FW_PORT_CORE;
    board.sram_bytes = FW_SRAM_BYTES;
    board.flash_bytes = FW_FLASH_BYTES;
    board.clock_hz = FW_PORT_TICK_HZ;
    board.cycles_measured = FW_PORT_CYCLES_MEASURED;
    uint32_t code_bytes = 0;
    fw_port_limits(FW_MODEL.arena_capacity, &board.arena_limit_bytes, &code_bytes);
    board.model_limit_bytes = FW_FLASH_BYTES > code_bytes ? FW_FLASH_BYTES - code_bytes : 0;
    fw_server_init(&server, &FW_MODEL, &board);
    for (;;) {
        const int c = fw_port_getc();
        if (c < 0) {
            return 0;
        }
        fw_server_feed(&server, (uint8_t)c);
    }
}
