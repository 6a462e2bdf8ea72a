/* QEMU mps2-an386: Cortex-M4 at 25 MHz (SysTick counts the CPU clock QEMU models; without
 * -icount that clock follows the host's real time). Flash and RAM sizes are the chosen
 * board preset's, capped by the linker script; QEMU itself has 4 MiB of each. */
#define FW_PORT_TICK_HZ 25000000u
#define FW_PORT_CORE "Cortex-M4 (QEMU mps2-an386)"
#define FW_PORT_CYCLES_MEASURED 1
#define FW_FLASH_ORIGIN 0x00000000
#define FW_RAM_ORIGIN 0x20000000
