/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The client's half of a SOCKS5 handshake (RFC 1928), parsed strictly and
 * OS-free, for the managed network's proxy (src/net/proxy.c). Only what
 * cordon's proxy offers is accepted: version 5, the method "no
 * authentication" (0x00), the command CONNECT. Both parsers take the bytes
 * received so far and say whether they are complete, incomplete (wait for
 * more) or to be refused, so a request split over many reads (or sent in
 * one write with the greeting) parses the same. Neither reads past len;
 * neither allocates.
 *
 * Sizes are bounded by the protocol: a greeting is at most
 * CD_SOCKS5_MAX_GREETING bytes, a request CD_SOCKS5_MAX_REQUEST.
 */

#include <stddef.h>
#include <stdint.h>

#define CD_SOCKS5_MAX_GREETING (2 + 255)
#define CD_SOCKS5_MAX_REQUEST  (4 + 1 + 255 + 2)

/* Commands and address types (RFC 1928 section 4). */
enum {
	CD_SOCKS5_CMD_CONNECT = 1,
	CD_SOCKS5_CMD_BIND = 2,
	CD_SOCKS5_CMD_UDP_ASSOCIATE = 3,
	CD_SOCKS5_ATYP_IPV4 = 1,
	CD_SOCKS5_ATYP_DOMAIN = 3,
	CD_SOCKS5_ATYP_IPV6 = 4,
};

/* Reply codes (RFC 1928 section 6). */
enum {
	CD_SOCKS5_REP_SUCCEEDED = 0,
	CD_SOCKS5_REP_GENERAL_FAILURE = 1,
	CD_SOCKS5_REP_NOT_ALLOWED = 2,
	CD_SOCKS5_REP_NETWORK_UNREACHABLE = 3,
	CD_SOCKS5_REP_HOST_UNREACHABLE = 4,
	CD_SOCKS5_REP_CONNECTION_REFUSED = 5,
	CD_SOCKS5_REP_TTL_EXPIRED = 6,
	CD_SOCKS5_REP_COMMAND_NOT_SUPPORTED = 7,
	CD_SOCKS5_REP_ADDRESS_TYPE_NOT_SUPPORTED = 8,
};

/* The method reply that refuses every method the client offered. */
#define CD_SOCKS5_NO_ACCEPTABLE_METHOD 0xff

/*
 * The greeting (VER NMETHODS METHODS...) in buf[0..len). Returns its length
 * (> 0) when complete and "no authentication" is offered; 0 when
 * incomplete; -EPROTO (not version 5) or -EACCES (no method cordon
 * accepts: the answer is CD_SOCKS5_NO_ACCEPTABLE_METHOD) with *reterr a
 * static string saying why.
 */
int cd_socks5_parse_greeting(const void *buf, size_t len, const char **reterr);

struct cd_socks5_request {
	uint8_t cmd;	  /* CD_SOCKS5_CMD_* (whatever the client sent) */
	uint8_t atyp;	  /* CD_SOCKS5_ATYP_* */
	uint16_t port;	  /* host order; 0 is the caller's to refuse */
	uint8_t addr[16]; /* ATYP_IPV4: the first 4 bytes; ATYP_IPV6: 16 */
	char name[256];	  /* ATYP_DOMAIN: name_len bytes as sent, then a NUL */
	size_t name_len;  /* 1..255 */
};

/*
 * The request (VER CMD RSV ATYP DST.ADDR DST.PORT) in buf[0..len). Returns
 * its length (> 0) when complete and a CONNECT; 0 when incomplete; a
 * negative errno to refuse it, with *ret_reply the reply code to send and
 * *reterr a static string: -EPROTO (not version 5, a reserved byte that
 * is not 0, an empty name: GENERAL_FAILURE), -EAFNOSUPPORT (an unknown
 * address type: ADDRESS_TYPE_NOT_SUPPORTED), -EOPNOTSUPP (BIND, UDP
 * ASSOCIATE or an unknown command: COMMAND_NOT_SUPPORTED; *ret is filled
 * then, for the audit line). Fields are checked as soon as their bytes
 * are there, so a bad version is refused before the rest arrives.
 */
int cd_socks5_parse_request(const void *buf, size_t len, struct cd_socks5_request *ret,
			    uint8_t *ret_reply, const char **reterr);

/* "CONNECT", "BIND", "UDP-ASSOCIATE" or "CMD-0xNN" (buf: 16 bytes at least). */
const char *cd_socks5_command_name(uint8_t cmd, char *buf, size_t n);
