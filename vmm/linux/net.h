/*
 * net.h - the guest's network policy: which guest ports are published on which host
 * addresses, and where the guest may connect (pure functions, unit-tested).
 */
#ifndef CCVM_LX_NET_H
#define CCVM_LX_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define LX_MAX_PUBLISH 32
#define LX_NET_ERR_LEN 160

/* One --publish rule: a guest bind to guest_port (any address, either family) binds
 * host_addr (its port: the host port) on the host. */
struct lx_publish {
	struct sockaddr_storage host_addr;
	socklen_t host_len;
	uint16_t guest_port;
};

#define LX_MAX_ALLOW 32

struct lx_net {
	struct lx_publish rules[LX_MAX_PUBLISH];
	int n_rules;
	bool host;   /* --net host: outgoing connections anywhere, not only to loopback */
	/* --net container: the network namespace ccvm runs in is the guest's own (a
	 * container's, ccvm-oci): binds, listens and connections as the guest asks */
	bool own_ns;
	/* --allow-port: loopback ports (TCP and UDP) the guest may reach besides its own */
	uint16_t allow_ports[LX_MAX_ALLOW];
	int n_allow_ports;
	/* --allow-unix: host socket files (real paths) the guest may reach beyond --rw */
	const char *allow_unix[LX_MAX_ALLOW];
	int n_allow_unix;
	/* ccvm's own control socket: never reachable (0/0: none) */
	dev_t deny_dev;
	ino_t deny_ino;
};

/* Parse "[HOSTIP:]HOSTPORT:GUESTPORT" (HOSTIP an IPv4 address or [IPv6], default
 * 127.0.0.1; ports 1..65535) into @out. Returns 0, or -EINVAL with a message in @err. */
int lx_net_parse_publish(const char *spec, struct lx_publish *out, char *err, size_t errlen);

/* "HOSTIP:PORT" (HOSTIP an IPv4 address or [IPv6]; port 1..65535) into @ss and @sl:
 * 0, or -EINVAL. */
int lx_net_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *sl);

/* The rule as lx_net_parse_publish reads it ("127.0.0.1:16379:6379", "[::1]:80:8080"). */
int lx_net_format_publish(const struct lx_publish *rule, char *out, size_t len);

/* Add @rule to @net: -EEXIST when its guest port or host address is already published,
 * -E2BIG past LX_MAX_PUBLISH. */
int lx_net_add(struct lx_net *net, const struct lx_publish *rule);

/* The rule publishing guest port @port, or NULL. */
const struct lx_publish *lx_net_rule_for_guest(const struct lx_net *net, uint16_t port);

/* The rule whose host address has port @port, or NULL. */
const struct lx_publish *lx_net_rule_for_host(const struct lx_net *net, uint16_t port);

/* Port of an AF_INET/AF_INET6 address (host order); 0 for other families. */
uint16_t lx_net_port(const struct sockaddr *sa);
void lx_net_set_port(struct sockaddr *sa, uint16_t port);

/* Add a loopback port the guest may reach (--allow-port): -E2BIG past LX_MAX_ALLOW. */
int lx_net_allow_port(struct lx_net *net, uint16_t port);

/* May the guest reach loopback port @port (a guest port number)? Always with --net
 * host; else a published guest port or one named by --allow-port. (Ports the guest's
 * own sockets are bound to are the personality's to know: sys_net.c.) */
bool lx_net_loopback_port_ok(const struct lx_net *net, uint16_t port);

/* The sockets a guest may have: AF_INET/AF_INET6 stream (TCP) or datagram (UDP), and
 * AF_UNIX stream, datagram or seqpacket. @type without SOCK_NONBLOCK/SOCK_CLOEXEC;
 * @protocol 0 or the one the type implies. Raw and packet sockets never. */
bool lx_net_socket_ok(int family, int type, int protocol);

/* Is @sa (AF_INET/AF_INET6) a loopback address? */
bool lx_net_is_loopback(const struct sockaddr *sa);

#endif
