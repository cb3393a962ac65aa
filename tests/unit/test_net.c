/*
 * test_net.c - the network policy: --publish parsing (addresses, ports, errors),
 * rules looked up by guest and host port, duplicates, loopback detection.
 */
#include "suites.h"
#include "../../vmm/linux/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static char err[LX_NET_ERR_LEN];

START_TEST(test_parse_default_ip)
{
	struct lx_publish r;
	const struct sockaddr_in *a = (const struct sockaddr_in *)&r.host_addr;

	ck_assert_int_eq(lx_net_parse_publish("16379:6379", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(r.guest_port, 6379);
	ck_assert_int_eq(a->sin_family, AF_INET);
	ck_assert_int_eq(ntohs(a->sin_port), 16379);
	ck_assert_uint_eq(ntohl(a->sin_addr.s_addr), INADDR_LOOPBACK);
	ck_assert_uint_eq(r.host_len, sizeof(struct sockaddr_in));
}
END_TEST

START_TEST(test_parse_addresses)
{
	struct lx_publish r;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&r.host_addr;
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&r.host_addr;

	ck_assert_int_eq(lx_net_parse_publish("0.0.0.0:8080:80", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(a4->sin_family, AF_INET);
	ck_assert_uint_eq(a4->sin_addr.s_addr, 0);
	ck_assert_int_eq(lx_net_port((const struct sockaddr *)&r.host_addr), 8080);
	ck_assert_int_eq(lx_net_parse_publish("[::1]:8443:443", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(a6->sin6_family, AF_INET6);
	ck_assert(IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr));
	ck_assert_int_eq(ntohs(a6->sin6_port), 8443);
	ck_assert_int_eq(r.guest_port, 443);
}
END_TEST

/* A rule formatted and parsed again is the same rule (saved in snapshot images). */
START_TEST(test_format_round_trip)
{
	static const char *specs[] = { "127.0.0.1:16379:6379", "0.0.0.0:8080:80", "[::1]:8443:443",
				       "[::]:1:65535" };

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct lx_publish r, back;
		char text[80];

		ck_assert_int_eq(lx_net_parse_publish(specs[i], &r, err, sizeof(err)), 0);
		ck_assert_int_eq(lx_net_format_publish(&r, text, sizeof(text)), 0);
		ck_assert_str_eq(text, specs[i]);
		ck_assert_int_eq(lx_net_parse_publish(text, &back, err, sizeof(err)), 0);
		ck_assert_int_eq(back.guest_port, r.guest_port);
		ck_assert_uint_eq(back.host_len, r.host_len);
		ck_assert_mem_eq(&back.host_addr, &r.host_addr, r.host_len);
	}
	{
		struct lx_publish r;
		char small[8];

		ck_assert_int_eq(lx_net_parse_publish("[::1]:8443:443", &r, err, sizeof(err)), 0);
		ck_assert_int_eq(lx_net_format_publish(&r, small, sizeof(small)), -ENAMETOOLONG);
	}
}
END_TEST

START_TEST(test_parse_errors)
{
	static const char *bad[] = { "", "80", "abc", "70000:80", "8080:0", "0:80", "8080:80x",
				     ":8080:80", "1.2.3:8080:80", "[::1]8080:80", "[::1:8080:80",
				     "host:8080:80", "1.2.3.4:8080:", "1234567890:80" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lx_publish r;

		err[0] = '\0';
		ck_assert_msg(lx_net_parse_publish(bad[i], &r, err, sizeof(err)) == -EINVAL,
			      "'%s' accepted", bad[i]);
		ck_assert(strstr(err, "HOSTPORT:GUESTPORT") != NULL);
	}
}
END_TEST

START_TEST(test_rules)
{
	struct lx_net net;
	struct lx_publish r;

	memset(&net, 0, sizeof(net));
	ck_assert_int_eq(lx_net_parse_publish("16379:6379", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_net_add(&net, &r), 0);
	ck_assert_int_eq(lx_net_add(&net, &r), -EEXIST);
	ck_assert_int_eq(lx_net_parse_publish("16379:7000", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_net_add(&net, &r), -EEXIST); /* the host side is taken */
	ck_assert_ptr_nonnull(lx_net_rule_for_guest(&net, 6379));
	ck_assert_ptr_null(lx_net_rule_for_guest(&net, 16379));
	ck_assert_ptr_nonnull(lx_net_rule_for_host(&net, 16379));
	ck_assert_ptr_null(lx_net_rule_for_host(&net, 6379));
	for (int i = 1; i < LX_MAX_PUBLISH; i++) {
		char spec[32];

		snprintf(spec, sizeof(spec), "%d:%d", 30000 + i, 1000 + i);
		ck_assert_int_eq(lx_net_parse_publish(spec, &r, err, sizeof(err)), 0);
		ck_assert_int_eq(lx_net_add(&net, &r), 0);
	}
	ck_assert_int_eq(lx_net_parse_publish("40000:2000", &r, err, sizeof(err)), 0);
	ck_assert_int_eq(lx_net_add(&net, &r), -E2BIG);
}
END_TEST

START_TEST(test_loopback)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };

	inet_pton(AF_INET, "127.3.4.5", &a4.sin_addr);
	ck_assert(lx_net_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "10.0.0.1", &a4.sin_addr);
	ck_assert(!lx_net_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET6, "::1", &a6.sin6_addr);
	ck_assert(lx_net_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
	ck_assert(lx_net_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
	ck_assert(!lx_net_is_loopback((struct sockaddr *)&a6));
}
END_TEST

Suite *net_suite(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("policy");

	tcase_add_test(tc, test_parse_default_ip);
	tcase_add_test(tc, test_parse_addresses);
	tcase_add_test(tc, test_format_round_trip);
	tcase_add_test(tc, test_parse_errors);
	tcase_add_test(tc, test_rules);
	tcase_add_test(tc, test_loopback);
	suite_add_tcase(s, tc);
	return s;
}
