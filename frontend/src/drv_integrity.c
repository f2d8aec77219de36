/*
 * The keyed hash of the driver's integrity check table (drv_export.c): HMAC
 * over MD2 with a fixed 16-byte key, which the static CUDA runtime recomputes
 * from what the driver reported and compares. MD2 and HMAC are nettle's.
 * Alone in its file so that a unit test checks it against a known answer.
 */
#include <stddef.h>
#include <stdint.h>

#include <nettle/hmac.h>
#include <nettle/md2.h>

#include "drv.h"

static const uint8_t integrity_key[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
					  0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

void fe_drv_integrity_digest(const uint8_t *msg, size_t len, uint8_t out[16])
{
	struct {
		struct md2_ctx outer, inner, state;
	} h;
	hmac_set_key(&h.outer, &h.inner, &h.state, &nettle_md2, sizeof(integrity_key), integrity_key);
	hmac_update(&h.state, &nettle_md2, len, msg);
	hmac_digest(&h.outer, &h.inner, &h.state, &nettle_md2, MD2_DIGEST_SIZE, out);
}

