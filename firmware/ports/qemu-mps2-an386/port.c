/* QEMU mps2-an386 port: CMSDK APB UART0 at 0x40004000 (the -serial chardev), its RX
 * interrupt (IRQ 0) to wake the core from WFI, SysTick ticks. */
#include <stdint.h>

#include "fw_port.h"

#define UART0 0x40004000u
#define UART_DATA (*(volatile uint32_t *)(UART0 + 0x00u))
#define UART_STATE (*(volatile uint32_t *)(UART0 + 0x04u)) /* bit0 TX full, bit1 RX full */
#define UART_CTRL (*(volatile uint32_t *)(UART0 + 0x08u))
#define UART_INTCLEAR (*(volatile uint32_t *)(UART0 + 0x0Cu))
#define UART_BAUDDIV (*(volatile uint32_t *)(UART0 + 0x10u))
#define NVIC_ISER0 (*(volatile uint32_t *)0xE000E100u)

#define STATE_TX_FULL 0x1u
#define STATE_RX_FULL 0x2u
#define CTRL_TX_EN 0x1u
#define CTRL_RX_EN 0x2u
#define CTRL_RX_INT_EN 0x8u
#define INT_RX 0x2u
#define UART0_RX_IRQ 0

void fw_cortex_m_start_ticks(void);

/* The RX interrupt only wakes the core; fw_port_getc reads the byte. */
void IRQ0_Handler(void)
{
    UART_INTCLEAR = INT_RX;
}

void fw_port_init(void)
{
    UART_BAUDDIV = 16;
    UART_CTRL = CTRL_TX_EN | CTRL_RX_EN | CTRL_RX_INT_EN;
    (void)UART_DATA; /* read once right after enabling RX, or QEMU may sit on the 1st byte */
    UART_INTCLEAR = 0xFu;
    NVIC_ISER0 = 1u << UART0_RX_IRQ;
    fw_cortex_m_start_ticks();
}

int fw_port_getc(void)
{
    for (;;) {
        /* Check and sleep with interrupts masked: a byte arriving in between still wakes
         * WFI (pending), and its handler runs once they are unmasked. */
        __asm volatile("cpsid i" ::: "memory");
        if (UART_STATE & STATE_RX_FULL) {
            __asm volatile("cpsie i" ::: "memory");
            break;
        }
        __asm volatile("wfi" ::: "memory");
        __asm volatile("cpsie i" ::: "memory");
    }
    return (int)(UART_DATA & 0xFFu);
}

void fw_port_putc(uint8_t byte)
{
    while (UART_STATE & STATE_TX_FULL) {
    }
    UART_DATA = byte;
}

void fw_port_flush(void)
{
}
