/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests for src/core/netaddr.c and src/core/netpolicy.c: address
 * literals, CIDRs, the classification of special addresses (shared by
 * http/request and the managed network's proxy), host name
 * normalisation, domain patterns and the policy's verdicts.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/netaddr.h"
#include "core/netpolicy.h"
#include "core/util.h"

/* ---- literals ---- */

static const struct {
	const char *in;
	int rc;
	const char *out; /* formatted back */
} literals[] = {
	{ "1.2.3.4", 0, "1.2.3.4" },
	{ "255.255.255.255", 0, "255.255.255.255" },
	{ "0.0.0.0", 0, "0.0.0.0" },
	{ "1.2.3", -EINVAL, NULL },
	{ "1.2.3.4.5", -EINVAL, NULL },
	{ "01.2.3.4", -EINVAL, NULL }, /* octal to inet_aton */
	{ "256.1.1.1", -EINVAL, NULL },
	{ "0x7f.0.0.1", -EINVAL, NULL },
	{ "2130706433", -EINVAL, NULL },
	{ "", -EINVAL, NULL },
	{ "::1", 0, "::1" },
	{ "::", 0, "::" },
	{ "fd00:ec2::254", 0, "fd00:ec2::254" },
	{ "2001:DB8:0:0:0:0:0:1", 0, "2001:db8::1" },
	{ "::ffff:127.0.0.1", 0, "::ffff:7f00:1" },
	{ "1:2:3:4:5:6:7:8", 0, "1:2:3:4:5:6:7:8" },
	{ "1::2::3", -EINVAL, NULL },
	{ "1:2:3:4:5:6:7:8:9", -EINVAL, NULL },
	{ ":1::", -EINVAL, NULL },
	{ "1:", -EINVAL, NULL },
	{ "12345::", -EINVAL, NULL },
	{ "fe80::1%eth0", -EINVAL, NULL },
	{ "[::1]", -EINVAL, NULL },
};

START_TEST(test_literal)
{
	struct cd_ipaddr a;
	char buf[64];
	int rc = cd_ipaddr_parse(literals[_i].in, &a);
	ck_assert_msg(rc == literals[_i].rc, "%s: %d", literals[_i].in, rc);
	if (rc == 0)
		ck_assert_str_eq(cd_ipaddr_format(&a, buf, sizeof(buf)), literals[_i].out);
}
END_TEST

static const struct {
	const char *addr;
	const char *why; /* substring, or NULL: an ordinary address */
	bool loopback;
} classes[] = {
	{ "127.0.0.1", "loopback", true },
	{ "127.255.0.9", "loopback", true },
	{ "::1", "loopback", true },
	{ "::ffff:127.0.0.1", "loopback", true },
	{ "64:ff9b::7f00:1", "loopback", true },
	{ "10.1.2.3", "private address (10.0.0.0/8)", false },
	{ "172.16.0.1", "private address (172.16.0.0/12)", false },
	{ "172.32.0.1", NULL, false },
	{ "192.168.1.1", "private address (192.168.0.0/16)", false },
	{ "100.64.0.1", "carrier-grade NAT", false },
	{ "169.254.169.254", "cloud metadata", false },
	{ "fd00:ec2::254", "cloud metadata", false },
	{ "::ffff:169.254.169.254", "cloud metadata", false },
	{ "fe80::1", "link-local", false },
	{ "224.0.0.1", "multicast", false },
	{ "ff02::1", "multicast", false },
	{ "240.0.0.1", "reserved", false },
	{ "255.255.255.255", "reserved", false },
	{ "0.0.0.0", "this network", false },
	{ "::", "unspecified", false },
	{ "192.0.2.1", "documentation", false },
	{ "2001:db8::1", "documentation", false },
	{ "2002:7f00:1::1", "6to4", false },
	{ "2001:0:4136:e378::1", "Teredo", false },
	{ "64:ff9b:1::a9fe:a9fe", "local-use NAT64", false },
	{ "64:ff9b:1:ffff::1", "local-use NAT64", false },
	{ "64:ff9b:2::1", NULL, false },
	{ "::ffff:0:a9fe:a9fe", "IPv4-translated", false },
	{ "2001:4860::8888", NULL, false },
	{ "8.8.8.8", NULL, false },
	{ "2606:4700::1111", NULL, false },
	{ "::ffff:8.8.8.8", NULL, false },
};

START_TEST(test_classify)
{
	struct cd_ipaddr a;
	bool loopback = !classes[_i].loopback;
	ck_assert_int_eq(cd_ipaddr_parse(classes[_i].addr, &a), 0);
	const char *why = cd_ipaddr_special(&a, &loopback);
	if (!classes[_i].why)
		ck_assert_msg(why == NULL, "%s: %s", classes[_i].addr, why);
	else
		ck_assert_msg(why && strstr(why, classes[_i].why), "%s: %s", classes[_i].addr,
			      why ? why : "(null)");
	ck_assert_msg(loopback == classes[_i].loopback, "%s", classes[_i].addr);
}
END_TEST

static const struct {
	const char *cidr;
	const char *err; /* substring, or NULL */
	const char *in, *out;
} cidrs[] = {
	{ "127.0.0.1", NULL, "127.0.0.1", "127.0.0.2" },
	{ "10.0.0.0/8", NULL, "10.255.1.1", "11.0.0.1" },
	{ "10.0.0.0/8", NULL, "::ffff:10.0.0.1", "fd00::1" },
	{ "0.0.0.0/0", NULL, "1.2.3.4", "::1" },
	{ "fd00:ec2::/32", NULL, "fd00:ec2::254", "fd00:ec3::1" },
	/* An embedded IPv4 address is matched as IPv4, by IPv4 ranges only. */
	{ "::/0", NULL, "2001:db8::1", "::ffff:127.0.0.1" },
	{ "::/0", NULL, "::1", "64:ff9b::a9fe:a9fe" },
	{ "::/64", NULL, "::1", "::ffff:169.254.169.254" },
	{ "64:ff9b::/32", NULL, "64:ff9b:1::1", "64:ff9b::10.0.0.1" },
	{ "::ffff:0:0/96", "IPv4-mapped or NAT64", NULL, NULL },
	{ "64:ff9b::/96", "write that IPv4 range", NULL, NULL },
	{ "::ffff:10.0.0.1", "IPv4-mapped or NAT64", NULL, NULL },
	{ "127.0.0.0/8", NULL, "64:ff9b::127.0.0.1", "::127.0.0.1" },
	{ "10.0.0.1/8", "host bits", NULL, NULL },
	{ "10.0.0.0/33", "0..32", NULL, NULL },
	{ "::/129", "0..128", NULL, NULL },
	{ "10.0.0.0/", "not a number", NULL, NULL },
	{ "10.0.0.0/08", "not a number", NULL, NULL },
	{ "example.com/8", "not an IP address", NULL, NULL },
};

START_TEST(test_cidr)
{
	struct cd_cidr c;
	struct cd_ipaddr a;
	const char *err = NULL;
	int rc = cd_cidr_parse(cidrs[_i].cidr, &c, &err);
	if (cidrs[_i].err) {
		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_msg(strstr(err, cidrs[_i].err), "%s: %s", cidrs[_i].cidr, err);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(cd_ipaddr_parse(cidrs[_i].in, &a), 0);
	ck_assert(cd_cidr_contains(&c, &a));
	ck_assert_int_eq(cd_ipaddr_parse(cidrs[_i].out, &a), 0);
	ck_assert(!cd_cidr_contains(&c, &a));
}
END_TEST

/* ---- names and patterns ---- */

static const struct {
	const char *in;
	const char *out; /* NULL: refused */
} names[] = {
	{ "Example.COM", "example.com" },
	{ "example.com.", "example.com" },
	{ "a_b.example.com", "a_b.example.com" },
	{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
	{ "b\xc3\xbc"
	  "cher.example",
	  NULL },
	{ "example..com", NULL },
	{ ".example.com", NULL },
	{ "example.com..", NULL },
	{ "", NULL },
	{ ".", NULL },
	{ "exa mple.com", NULL },
	{ "2130706433", NULL },
	{ "127.1", NULL },
	{ "1.2.3.4", NULL },
	{ "a.123", NULL },
	{ "123.a", "123.a" },
};

START_TEST(test_normalize)
{
	char *out = NULL;
	const char *err = NULL;
	int rc = cd_hostname_normalize(names[_i].in, strlen(names[_i].in), &out, &err);
	if (!names[_i].out) {
		ck_assert_msg(rc == -EINVAL && err, "%s", names[_i].in);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(out, names[_i].out);
	free(out);
}
END_TEST

static const struct {
	const char *pattern, *name;
	bool match;
} matches[] = {
	{ "example.com", "example.com", true },	       { "example.com", "www.example.com", false },
	{ "*.example.com", "www.example.com", true },  { "*.example.com", "a.b.example.com", true },
	{ "*.example.com", "example.com", false },     { "*.example.com", "badexample.com", false },
	{ "**.example.com", "example.com", true },     { "**.example.com", "a.example.com", true },
	{ "**.example.com", "notexample.com", false }, { "*", "anything.test", true },
};

START_TEST(test_match)
{
	ck_assert_msg(cd_domain_pattern_matches(matches[_i].pattern, matches[_i].name) ==
			      matches[_i].match,
		      "%s ~ %s", matches[_i].pattern, matches[_i].name);
}
END_TEST

START_TEST(test_patterns_refused)
{
	struct cd_netpolicy p = { 0 };
	const char *err = NULL;
	static const char *const bad[] = {
		"foo*.example.com", "*example.com", "example.*", "***.example.com",
		"*.*.example.com",  "1.2.3.4",	    "*.",	 "",
		"example.com.",	    "b\xc3\xbc.de",
	};
	for (size_t i = 0; i < CD_ARRAY_SIZE(bad); i++) {
		err = NULL;
		ck_assert_msg(cd_netpolicy_add_domain(&p, bad[i], false, &err) == -EINVAL && err,
			      "%s", bad[i]);
	}
	ck_assert_int_eq(p.n_allow, 0);
	ck_assert_int_eq(cd_netpolicy_add_domain(&p, "*.Example.COM", false, &err), 0);
	ck_assert_str_eq(p.allow[0], "*.example.com");
	cd_netpolicy_done(&p);
}
END_TEST

START_TEST(test_verdicts)
{
	struct cd_netpolicy p = { 0 };
	const char *err = NULL;
	char *rule = NULL;

	/* an empty allow list: no network */
	ck_assert(!cd_netpolicy_allows_name(&p, "example.com", &rule));
	ck_assert_msg(strstr(rule, "empty allow list"), "%s", rule);
	free(rule);

	ck_assert_int_eq(cd_netpolicy_add_domain(&p, "**.example.com", false, &err), 0);
	ck_assert_int_eq(cd_netpolicy_add_domain(&p, "*", false, &err), 0);
	ck_assert_int_eq(cd_netpolicy_add_domain(&p, "evil.example.com", true, &err), 0);
	ck_assert(cd_netpolicy_allows_name(&p, "a.example.com", &rule));
	ck_assert_str_eq(rule, "allow-domain **.example.com");
	free(rule);
	/* deny wins, whatever the order */
	ck_assert(!cd_netpolicy_allows_name(&p, "evil.example.com", &rule));
	ck_assert_str_eq(rule, "deny-domain evil.example.com");
	free(rule);
	ck_assert(cd_netpolicy_allows_name(&p, "other.test", &rule));
	ck_assert_str_eq(rule, "allow-domain *");
	free(rule);
	cd_netpolicy_done(&p);

	ck_assert_int_eq(cd_netpolicy_add_domain(&p, "example.com", false, &err), 0);
	ck_assert(!cd_netpolicy_allows_name(&p, "www.example.com", &rule));
	ck_assert_str_eq(rule, "no allow-domain pattern matches");
	free(rule);

	struct cd_ipaddr a;
	ck_assert_int_eq(cd_netpolicy_add_cidr(&p, "127.0.0.1/32", &err), 0);
	ck_assert_int_eq(cd_netpolicy_add_cidr(&p, "10.0.0.0/33", &err), -EINVAL);
	ck_assert_int_eq(cd_ipaddr_parse("127.0.0.1", &a), 0);
	ck_assert_ptr_nonnull(cd_netpolicy_cidr_for(&p, &a));
	ck_assert_int_eq(cd_ipaddr_parse("127.0.0.2", &a), 0);
	ck_assert_ptr_null(cd_netpolicy_cidr_for(&p, &a));
	cd_netpolicy_done(&p);

	ck_assert_int_eq(cd_netmode_from_string("limited"), CD_NETMODE_LIMITED);
	ck_assert_int_eq(cd_netmode_from_string("full"), CD_NETMODE_FULL);
	ck_assert_int_eq(cd_netmode_from_string("Full"), CD_NETMODE_INVALID);
}
END_TEST

static Suite *netpolicy_suite(void)
{
	Suite *s = suite_create("netpolicy");
	TCase *tc = tcase_create("addresses");
	tcase_add_loop_test(tc, test_literal, 0, CD_ARRAY_SIZE(literals));
	tcase_add_loop_test(tc, test_classify, 0, CD_ARRAY_SIZE(classes));
	tcase_add_loop_test(tc, test_cidr, 0, CD_ARRAY_SIZE(cidrs));
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_loop_test(tc, test_normalize, 0, CD_ARRAY_SIZE(names));
	tcase_add_loop_test(tc, test_match, 0, CD_ARRAY_SIZE(matches));
	tcase_add_test(tc, test_patterns_refused);
	tcase_add_test(tc, test_verdicts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(netpolicy_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
