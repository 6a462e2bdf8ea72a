/* The host port: stdin/stdout, nanosecond ticks from CLOCK_MONOTONIC. */
#define FW_PORT_TICK_HZ 1000000000u
#define FW_PORT_CORE "host process (stdio)"
#define FW_PORT_CYCLES_MEASURED 1
