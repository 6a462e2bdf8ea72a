/* Nordic nRF52840 (e.g. the nRF52840 DK): Cortex-M4F at 64 MHz, 1 MB flash at 0, 256 KB RAM
 * at 0x20000000 (the board preset's sizes cap the link). No SoftDevice, no bootloader:
 * the image starts at 0 (flash it with a J-Link, nrfjprog or pyocd). */
#define FW_PORT_TICK_HZ 64000000u
#define FW_PORT_CORE "Cortex-M4F (nRF52840)"
#define FW_PORT_CYCLES_MEASURED 1
#define FW_FLASH_ORIGIN 0x00000000
#define FW_RAM_ORIGIN 0x20000000
