/* core/crc32c: CRC-32C (Castagnoli), as TensorBoard's record format uses it.
 *
 *     uint32_t c = zt_crc32c(0, data, len);
 */
#ifndef ZT_CORE_CRC32C_H
#define ZT_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t zt_crc32c(uint32_t crc, const void *data, size_t len);

#endif
