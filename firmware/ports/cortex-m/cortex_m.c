/* What every Cortex-M port shares: the vector table, the reset handler (copy .data, zero
 * .bss, enable the FPU when built for it), 64-bit ticks from SysTick at the core clock,
 * and the memory limits the linker script computed. A port adds its UART (port.c) and
 * names its IRQ handlers IRQ<n>_Handler. */
#include <stdint.h>

#include "fw_port.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[];
extern char __arena_limit_bytes[], __code_bytes[];
int main(void);

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SCB_ICSR (*(volatile uint32_t *)0xE000ED04u)
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define ICSR_PENDSTSET (1u << 26)
#define SYSTICK_RELOAD 0x00FFFFFFu

static volatile uint32_t systick_wraps;

void SysTick_Handler(void)
{
    systick_wraps++;
}

void fw_cortex_m_start_ticks(void)
{
    SYST_RVR = SYSTICK_RELOAD;
    SYST_CVR = 0;
    SYST_CSR = 7u; /* core clock, interrupt on wrap, enabled */
}

uint64_t fw_port_ticks(void)
{
    uint32_t primask;
    __asm volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    uint32_t wraps = systick_wraps;
    uint32_t value = SYST_CVR;
    if (SCB_ICSR & ICSR_PENDSTSET) { /* wrapped, not yet counted: read again after it */
        value = SYST_CVR;
        wraps++;
    }
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
    return ((uint64_t)wraps << 24) + (SYSTICK_RELOAD - value);
}

void fw_port_limits(uint32_t arena_capacity, uint32_t *arena_limit_bytes, uint32_t *code_bytes)
{
    (void)arena_capacity; /* the arena may run on to the end of RAM */
    *arena_limit_bytes = (uint32_t)(uintptr_t)__arena_limit_bytes;
    *code_bytes = (uint32_t)(uintptr_t)__code_bytes;
}

void Reset_Handler(void)
{
    for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) {
        *dst++ = *src++;
    }
    for (volatile uint32_t *dst = __bss_start; dst < __bss_end;) {
        *dst++ = 0;
    }
#if defined(__ARM_FP)
    SCB_CPACR |= 0xFu << 20; /* CP10, CP11: full access */
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    main();
    for (;;) {
        __asm volatile("wfi");
    }
}

void Default_Handler(void)
{
    for (;;) {
    }
}

#define WEAK_HANDLER(name) void name(void) __attribute__((weak, alias("Default_Handler")))
WEAK_HANDLER(NMI_Handler);
WEAK_HANDLER(HardFault_Handler);
WEAK_HANDLER(MemManage_Handler);
WEAK_HANDLER(BusFault_Handler);
WEAK_HANDLER(UsageFault_Handler);
WEAK_HANDLER(SVC_Handler);
WEAK_HANDLER(DebugMon_Handler);
WEAK_HANDLER(PendSV_Handler);
WEAK_HANDLER(IRQ0_Handler);
WEAK_HANDLER(IRQ1_Handler);
WEAK_HANDLER(IRQ2_Handler);
WEAK_HANDLER(IRQ3_Handler);
WEAK_HANDLER(IRQ4_Handler);
WEAK_HANDLER(IRQ5_Handler);
WEAK_HANDLER(IRQ6_Handler);
WEAK_HANDLER(IRQ7_Handler);

typedef void (*vector_t)(void);

__attribute__((section(".vectors"), used)) const vector_t fw_vectors[16 + 8] = {
    (vector_t)(uintptr_t)__stack_top,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    0,
    0,
    0,
    0,
    SVC_Handler,
    DebugMon_Handler,
    0,
    PendSV_Handler,
    SysTick_Handler,
    IRQ0_Handler,
    IRQ1_Handler,
    IRQ2_Handler,
    IRQ3_Handler,
    IRQ4_Handler,
    IRQ5_Handler,
    IRQ6_Handler,
    IRQ7_Handler,
};
