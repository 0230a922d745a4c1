/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SOCKS5 handshake parsing: see socks5.h. */
#include "core/socks5.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int cd_socks5_parse_greeting(const void *buf, size_t len, const char **reterr)
{
	const uint8_t *b = buf;

	if (len < 1)
		return 0;
	if (b[0] != 5) {
		*reterr = "not SOCKS version 5";
		return -EPROTO;
	}
	if (len < 2 || len < 2u + b[1])
		return 0;
	for (size_t i = 0; i < b[1]; i++)
		if (b[2 + i] == 0)
			return 2 + b[1];
	*reterr = "no method cordon accepts (only 0x00, no authentication)";
	return -EACCES;
}

static int refuse(uint8_t *ret_reply, const char **reterr, uint8_t reply, const char *why, int err)
{
	*ret_reply = reply;
	*reterr = why;
	return err;
}

int cd_socks5_parse_request(const void *buf, size_t len, struct cd_socks5_request *ret,
			    uint8_t *ret_reply, const char **reterr)
{
	const uint8_t *b = buf;
	size_t alen, need;

	if (len >= 1 && b[0] != 5)
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_GENERAL_FAILURE,
			      "SOCKS5: a request that is not version 5", -EPROTO);
	if (len >= 3 && b[2] != 0)
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_GENERAL_FAILURE,
			      "SOCKS5: a request whose reserved byte is not 0", -EPROTO);
	if (len < 4)
		return 0;
	switch (b[3]) {
	case CD_SOCKS5_ATYP_IPV4:
		alen = 4;
		break;
	case CD_SOCKS5_ATYP_IPV6:
		alen = 16;
		break;
	case CD_SOCKS5_ATYP_DOMAIN:
		if (len < 5)
			return 0;
		if (b[4] == 0)
			return refuse(ret_reply, reterr, CD_SOCKS5_REP_GENERAL_FAILURE,
				      "SOCKS5: an empty domain name", -EPROTO);
		alen = 1 + (size_t)b[4];
		break;
	default:
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_ADDRESS_TYPE_NOT_SUPPORTED,
			      "SOCKS5: an unknown address type", -EAFNOSUPPORT);
	}
	need = 4 + alen + 2;
	if (len < need)
		return 0;

	memset(ret, 0, sizeof(*ret));
	ret->cmd = b[1];
	ret->atyp = b[3];
	ret->port = (uint16_t)(b[need - 2] << 8 | b[need - 1]);
	if (b[3] == CD_SOCKS5_ATYP_DOMAIN) {
		ret->name_len = b[4];
		memcpy(ret->name, b + 5, ret->name_len);
		ret->name[ret->name_len] = '\0';
	} else {
		memcpy(ret->addr, b + 4, alen);
	}
	switch (b[1]) {
	case CD_SOCKS5_CMD_CONNECT:
		return (int)need;
	case CD_SOCKS5_CMD_BIND:
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_COMMAND_NOT_SUPPORTED,
			      "SOCKS5: BIND is not supported (CONNECT only)", -EOPNOTSUPP);
	case CD_SOCKS5_CMD_UDP_ASSOCIATE:
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_COMMAND_NOT_SUPPORTED,
			      "SOCKS5: UDP ASSOCIATE is not supported (CONNECT only)", -EOPNOTSUPP);
	default:
		return refuse(ret_reply, reterr, CD_SOCKS5_REP_COMMAND_NOT_SUPPORTED,
			      "SOCKS5: an unknown command (CONNECT only)", -EOPNOTSUPP);
	}
}

const char *cd_socks5_command_name(uint8_t cmd, char *buf, size_t n)
{
	switch (cmd) {
	case CD_SOCKS5_CMD_CONNECT:
		return "CONNECT";
	case CD_SOCKS5_CMD_BIND:
		return "BIND";
	case CD_SOCKS5_CMD_UDP_ASSOCIATE:
		return "UDP-ASSOCIATE";
	default:
		snprintf(buf, n, "CMD-0x%02x", cmd);
		return buf;
	}
}
