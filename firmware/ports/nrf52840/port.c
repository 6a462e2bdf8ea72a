/* nRF52840 port: UART0 (the nRF52840 DK routes P0.06 TXD / P0.08 RXD to the J-Link's USB
 * virtual COM port) at 115200 baud, 8N1, no flow control; received bytes go through a small
 * ring filled by the RXDRDY interrupt (the UART's own FIFO holds 6 bytes), the core sleeps
 * in WFI while it waits. Ticks: SysTick at 64 MHz. Compiles here; not flashed in CI. */
#include <stdint.h>

#include "fw_port.h"

#define CLOCK 0x40000000u
#define CLOCK_TASKS_HFCLKSTART (*(volatile uint32_t *)(CLOCK + 0x000u))
#define CLOCK_EVENTS_HFCLKSTARTED (*(volatile uint32_t *)(CLOCK + 0x100u))

#define UART0 0x40002000u
#define UART_TASKS_STARTRX (*(volatile uint32_t *)(UART0 + 0x000u))
#define UART_TASKS_STARTTX (*(volatile uint32_t *)(UART0 + 0x008u))
#define UART_EVENTS_RXDRDY (*(volatile uint32_t *)(UART0 + 0x108u))
#define UART_EVENTS_TXDRDY (*(volatile uint32_t *)(UART0 + 0x11Cu))
#define UART_INTENSET (*(volatile uint32_t *)(UART0 + 0x304u))
#define UART_ENABLE (*(volatile uint32_t *)(UART0 + 0x500u))
#define UART_PSEL_RTS (*(volatile uint32_t *)(UART0 + 0x508u))
#define UART_PSEL_TXD (*(volatile uint32_t *)(UART0 + 0x50Cu))
#define UART_PSEL_CTS (*(volatile uint32_t *)(UART0 + 0x510u))
#define UART_PSEL_RXD (*(volatile uint32_t *)(UART0 + 0x514u))
#define UART_RXD (*(volatile uint32_t *)(UART0 + 0x518u))
#define UART_TXD (*(volatile uint32_t *)(UART0 + 0x51Cu))
#define UART_BAUDRATE (*(volatile uint32_t *)(UART0 + 0x524u))
#define UART_CONFIG (*(volatile uint32_t *)(UART0 + 0x56Cu))
#define NVIC_ISER0 (*(volatile uint32_t *)0xE000E100u)

#define GPIO_P0 0x50000000u
#define GPIO_DIRSET (*(volatile uint32_t *)(GPIO_P0 + 0x518u))
#define GPIO_OUTSET (*(volatile uint32_t *)(GPIO_P0 + 0x508u))

#define PIN_TXD 6u
#define PIN_RXD 8u
#define PSEL_DISCONNECTED 0xFFFFFFFFu
#define BAUD_115200 0x01D7E000u
#define UART_ENABLED 4u
#define INT_RXDRDY (1u << 2)
#define UART0_IRQ 2

#define RING_BYTES 64u /* a power of two */
static volatile uint8_t ring[RING_BYTES];
static volatile uint32_t ring_head, ring_tail;

void fw_cortex_m_start_ticks(void);

void IRQ2_Handler(void)
{
    while (UART_EVENTS_RXDRDY) {
        UART_EVENTS_RXDRDY = 0;
        const uint8_t byte = (uint8_t)UART_RXD;
        if (ring_head - ring_tail < RING_BYTES) { /* else dropped: the CRC will tell */
            ring[ring_head % RING_BYTES] = byte;
            ring_head++;
        }
    }
}

void fw_port_init(void)
{
    CLOCK_EVENTS_HFCLKSTARTED = 0;
    CLOCK_TASKS_HFCLKSTART = 1; /* the crystal: an accurate baud rate */
    while (!CLOCK_EVENTS_HFCLKSTARTED) {
    }
    GPIO_OUTSET = 1u << PIN_TXD;
    GPIO_DIRSET = 1u << PIN_TXD;
    UART_PSEL_TXD = PIN_TXD;
    UART_PSEL_RXD = PIN_RXD;
    UART_PSEL_RTS = PSEL_DISCONNECTED;
    UART_PSEL_CTS = PSEL_DISCONNECTED;
    UART_BAUDRATE = BAUD_115200;
    UART_CONFIG = 0; /* no parity, no flow control */
    UART_ENABLE = UART_ENABLED;
    UART_EVENTS_RXDRDY = 0;
    UART_EVENTS_TXDRDY = 0;
    UART_INTENSET = INT_RXDRDY;
    NVIC_ISER0 = 1u << UART0_IRQ;
    UART_TASKS_STARTRX = 1;
    UART_TASKS_STARTTX = 1;
    fw_cortex_m_start_ticks();
}

int fw_port_getc(void)
{
    for (;;) {
        __asm volatile("cpsid i" ::: "memory");
        if (ring_head != ring_tail) {
            const uint8_t byte = ring[ring_tail % RING_BYTES];
            ring_tail++;
            __asm volatile("cpsie i" ::: "memory");
            return byte;
        }
        __asm volatile("wfi" ::: "memory");
        __asm volatile("cpsie i" ::: "memory");
    }
}

void fw_port_putc(uint8_t byte)
{
    UART_EVENTS_TXDRDY = 0;
    UART_TXD = byte;
    while (!UART_EVENTS_TXDRDY) {
    }
}

void fw_port_flush(void)
{
}
