/* CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial and final value inverted), the
 * checksum of each tensor in ftl's safetensors files. ftl_crc32c uses the SSE4.2 crc32 instruction
 * when the CPU has it (x86-64's baseline does not) and a table otherwise; both give the same value. */
#ifndef FTL_UTIL_CRC32C_H
#define FTL_UTIL_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CRC of the bytes so far (0 for none) extended by `size` more: ftl_crc32c(0, "123456789", 9)
 * is 0xE3069283, and ftl_crc32c(ftl_crc32c(0, a, n), b, m) is the CRC of a followed by b. */
uint32_t ftl_crc32c(uint32_t crc, const void *data, size_t size);
/* The two implementations ftl_crc32c chooses between (for tests and the benchmark); the hardware
 * one runs the table where !ftl_crc32c_hardware_available(). */
uint32_t ftl_crc32c_portable(uint32_t crc, const void *data, size_t size);
uint32_t ftl_crc32c_hardware(uint32_t crc, const void *data, size_t size);
bool ftl_crc32c_hardware_available(void);

#endif
