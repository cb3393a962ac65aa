/*
 * net.c - the guest's network policy.
 *
 * Guest sockets are host sockets owned by ccvm (sys_net.c); what keeps the guest from
 * reaching host ports it was not given is decided here. A guest may listen only on
 * published ports: `--publish [HOSTIP:]HOSTPORT:GUESTPORT` (like Docker's) makes a
 * guest bind to GUESTPORT, on any address, bind HOSTIP:HOSTPORT on the host instead
 * (HOSTIP defaults to 127.0.0.1, so nothing is exposed beyond the machine unless
 * asked). The guest keeps seeing its own port numbers (getsockname, and connections
 * to its own published ports are sent to their host side). Outgoing connections go to
 * loopback only, unless `--net host`, and on loopback only to the guest's own
 * published ports, ports its own sockets are bound to, and ports named by
 * `--allow-port`: the host's other loopback services (databases, agents, ccvm's
 * neighbours) are not the guest's to reach.
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int net_port(const char *s, uint16_t *port)
{
	char *end;
	long v;

	if (!*s)
		return -EINVAL;
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/* The host address part: "1.2.3.4" or "[::1]". */
static int net_host_ip(const char *s, size_t len, struct sockaddr_storage *ss, socklen_t *sl)
{
	char ip[INET6_ADDRSTRLEN + 2];

	if (len + 1 > sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, len);
	ip[len] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (len > 2 && ip[0] == '[' && ip[len - 1] == ']') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

		ip[len - 1] = '\0';
		a6->sin6_family = AF_INET6;
		*sl = sizeof(*a6);
		return inet_pton(AF_INET6, ip + 1, &a6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

	a4->sin_family = AF_INET;
	*sl = sizeof(*a4);
	return inet_pton(AF_INET, ip, &a4->sin_addr) == 1 ? 0 : -EINVAL;
}

int lx_net_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sl)
{
	const char *last = strrchr(s, ':');
	uint16_t port;

	if (!last || net_port(last + 1, &port) ||
	    net_host_ip(s, (size_t)(last - s), ss, sl))
		return -EINVAL;
	lx_net_set_port((struct sockaddr *)ss, port);
	return 0;
}

int lx_net_format_publish(const struct lx_publish *rule, char *out, size_t len)
{
	const struct sockaddr *sa = (const struct sockaddr *)&rule->host_addr;
	char ip[INET6_ADDRSTRLEN];
	const void *a = sa->sa_family == AF_INET6 ?
				(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr :
				(const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	int n;

	if (!inet_ntop(sa->sa_family, a, ip, sizeof(ip)))
		return -EINVAL;
	n = snprintf(out, len, sa->sa_family == AF_INET6 ? "[%s]:%u:%u" : "%s:%u:%u", ip,
		     lx_net_port(sa), rule->guest_port);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int lx_net_parse_publish(const char *spec, struct lx_publish *out, char *err, size_t errlen)
{
	const char *last = strrchr(spec, ':'), *mid;
	char hostport[8];
	uint16_t hport;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!last || net_port(last + 1, &out->guest_port))
		goto bad;
	/* HOSTPORT is between the previous colon (outside brackets) and the last. */
	for (mid = last; mid > spec && mid[-1] != ':' && mid[-1] != ']'; mid--)
		;
	if ((size_t)(last - mid) >= sizeof(hostport) || last == mid)
		goto bad;
	memcpy(hostport, mid, (size_t)(last - mid));
	hostport[last - mid] = '\0';
	if (net_port(hostport, &hport))
		goto bad;
	if (mid == spec)
		rc = net_host_ip("127.0.0.1", 9, &out->host_addr, &out->host_len);
	else if (mid[-1] == ':' && mid - 1 > spec)
		rc = net_host_ip(spec, (size_t)(mid - 1 - spec), &out->host_addr, &out->host_len);
	else
		goto bad;
	if (rc)
		goto bad;
	lx_net_set_port((struct sockaddr *)&out->host_addr, hport);
	return 0;
bad:
	snprintf(err, errlen, "--publish %s: expected [HOSTIP:]HOSTPORT:GUESTPORT (HOSTIP an "
		 "IPv4 address or [IPv6], ports 1-65535)", spec);
	return -EINVAL;
}

uint16_t lx_net_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

void lx_net_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

int lx_net_add(struct lx_net *net, const struct lx_publish *rule)
{
	uint16_t hport = lx_net_port((const struct sockaddr *)&rule->host_addr);

	if (lx_net_rule_for_guest(net, rule->guest_port) || lx_net_rule_for_host(net, hport))
		return -EEXIST;
	if (net->n_rules == LX_MAX_PUBLISH)
		return -E2BIG;
	net->rules[net->n_rules++] = *rule;
	return 0;
}

const struct lx_publish *lx_net_rule_for_guest(const struct lx_net *net, uint16_t port)
{
	for (int i = 0; i < net->n_rules; i++)
		if (net->rules[i].guest_port == port)
			return &net->rules[i];
	return NULL;
}

const struct lx_publish *lx_net_rule_for_host(const struct lx_net *net, uint16_t port)
{
	for (int i = 0; i < net->n_rules; i++)
		if (lx_net_port((const struct sockaddr *)&net->rules[i].host_addr) == port)
			return &net->rules[i];
	return NULL;
}

bool lx_net_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

bool lx_net_socket_ok(int family, int type, int protocol)
{
	switch (family) {
	case AF_INET:
	case AF_INET6:
		if (type == SOCK_STREAM)
			return protocol == 0 || protocol == IPPROTO_TCP;
		if (type == SOCK_DGRAM)
			return protocol == 0 || protocol == IPPROTO_UDP;
		return false;
	case AF_UNIX:
		return (type == SOCK_STREAM || type == SOCK_DGRAM || type == SOCK_SEQPACKET) &&
		       protocol == 0;
	default:
		return false;
	}
}

int lx_net_allow_port(struct lx_net *net, uint16_t port)
{
	for (int i = 0; i < net->n_allow_ports; i++)
		if (net->allow_ports[i] == port)
			return 0;
	if (net->n_allow_ports == LX_MAX_ALLOW)
		return -E2BIG;
	net->allow_ports[net->n_allow_ports++] = port;
	return 0;
}

bool lx_net_loopback_port_ok(const struct lx_net *net, uint16_t port)
{
	if (net->host)
		return true;
	if (port && lx_net_rule_for_guest(net, port))
		return true;
	for (int i = 0; i < net->n_allow_ports; i++)
		if (port && net->allow_ports[i] == port)
			return true;
	return false;
}
