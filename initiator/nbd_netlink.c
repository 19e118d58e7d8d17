/* SPDX-License-Identifier: MIT */
/*
 * Kernel NBD driver control over generic netlink, with libnl-genl-3.
 * One request at a time on a private socket: send, then read until the
 * kernel's ACK or error, collecting the reply (if any) on the way.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "nbd_netlink.h"

int nbd_parse_device(const char *s, int *index)
{
	static const char prefix[] = "/dev/nbd";
	unsigned long v = 0;
	const char *p;

	if (!strcmp(s, "auto")) {
		*index = -1;
		return 0;
	}
	if (strncmp(s, prefix, sizeof(prefix) - 1))
		return -EINVAL;
	p = s + sizeof(prefix) - 1;
	if (!*p || (*p == '0' && p[1]))
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > (1ul << 20)) /* MINORBITS; the kernel refuses more anyway */
			return -EINVAL;
	}
	*index = (int)v;
	return 0;
}

#if defined(HAVE_NBD_NETLINK) && defined(HAVE_LINUX_NBD_NETLINK_H)

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <linux/nbd-netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

/* The kernel answers at once except for DISCONNECT, which waits for its
 * socket workers; they are bounded by our own command timeouts. */
#define NL_RECV_TIMEOUT_S 30

struct nbd_nl {
	struct nl_sock *sk;
	int family;
};

/* One request's outcome, filled by the callbacks. */
struct nl_req {
	bool done;
	int err; /* kernel errno (negative) from NLMSG_ERROR */
	int (*parse)(struct nl_req *r, struct nlattr **tb);
	int index; /* CONNECT reply */
	int want_index; /* STATUS: the device asked about */
	bool found, connected; /* STATUS reply */
	bool logged; /* a local failure was logged already */
};

static int nle_to_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_NOMEM: return -ENOMEM;
	case NLE_PERM: return -EPERM;
	case NLE_NOACCESS: return -EACCES;
	case NLE_OBJ_NOTFOUND: return -ENOENT;
	case NLE_BUSY: return -EBUSY;
	case NLE_INVAL: return -EINVAL;
	case NLE_AGAIN: return -ETIMEDOUT;
	case NLE_OPNOTSUPP: return -EOPNOTSUPP;
	default: return -EIO;
	}
}

static bool nbd_module_loaded(void)
{
	struct stat st;

	return stat("/sys/module/nbd", &st) == 0;
}

int nbd_nl_open(struct nbd_nl **out)
{
	struct timeval tv = { .tv_sec = NL_RECV_TIMEOUT_S };
	struct nbd_nl *nl;
	int ret;

	nl = calloc(1, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	nl->sk = nl_socket_alloc();
	if (!nl->sk) {
		ret = -ENOMEM;
		rb_err("nbd netlink: cannot allocate a netlink socket");
		goto out_free;
	}
	ret = genl_connect(nl->sk);
	if (ret < 0) {
		rb_err("nbd netlink: cannot open a generic netlink socket: %s", nl_geterror(ret));
		ret = nle_to_errno(ret);
		goto out_free_sock;
	}
	if (setsockopt(nl_socket_get_fd(nl->sk), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		rb_warn("nbd netlink: SO_RCVTIMEO: %s (replies are waited for without a limit)",
			strerror(errno));
	/* The kernel would autoload the module here if it could. */
	ret = genl_ctrl_resolve(nl->sk, NBD_GENL_FAMILY_NAME);
	if (ret < 0) {
		if (nbd_module_loaded())
			rb_err("nbd netlink: the kernel has the nbd module but no '%s' netlink "
			       "family (%s): kernel too old?",
			       NBD_GENL_FAMILY_NAME, nl_geterror(ret));
		else
			rb_err("nbd netlink: the kernel NBD driver is not loaded: run 'modprobe nbd' "
			       "(as root) and try again");
		ret = -ENOENT;
		goto out_free_sock;
	}
	nl->family = ret;
	*out = nl;
	return 0;

out_free_sock:
	nl_socket_free(nl->sk);
out_free:
	free(nl);
	return ret;
}

void nbd_nl_close(struct nbd_nl *nl)
{
	if (!nl)
		return;
	nl_socket_free(nl->sk);
	free(nl);
}

/* ---- one request ------------------------------------------------------------ */

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct nl_req *r = arg;
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	static const struct nla_policy pol[NBD_ATTR_MAX + 1] = {
		[NBD_ATTR_INDEX] = { .type = NLA_U32 },
		[NBD_ATTR_DEVICE_LIST] = { .type = NLA_NESTED },
	};

	if (!r->parse)
		return NL_OK;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, NBD_ATTR_MAX, pol) < 0) {
		rb_warn("nbd netlink: malformed reply from the kernel (ignored)");
		return NL_OK;
	}
	r->parse(r, tb);
	return NL_OK;
}

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct nl_req *r = arg;

	(void)nla;
	r->err = e->error < 0 ? e->error : -e->error;
	r->done = true;
	return NL_STOP;
}

static int on_ack(struct nl_msg *msg, void *arg)
{
	struct nl_req *r = arg;

	(void)msg;
	r->done = true;
	return NL_STOP;
}

/* Send msg (consumed) and collect the answer.  0, the kernel's -errno, or
 * a local -errno (logged: r->logged). */
static int nl_request(struct nbd_nl *nl, struct nl_msg *msg, struct nl_req *r, const char *what)
{
	struct nl_cb *cb;
	int ret;

	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb) {
		nlmsg_free(msg);
		rb_err("nbd netlink: %s: out of memory", what);
		r->logged = true;
		return -ENOMEM;
	}
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, r);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, r);
	nl_cb_err(cb, NL_CB_CUSTOM, on_error, r);
	ret = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	if (ret < 0) {
		rb_err("nbd netlink: %s: send: %s", what, nl_geterror(ret));
		r->logged = true;
		ret = nle_to_errno(ret);
		goto out_put_cb;
	}
	ret = 0;
	while (!r->done) {
		ret = nl_recvmsgs(nl->sk, cb);
		if (r->done)
			break;
		if (ret < 0) {
			rb_err("nbd netlink: %s: %s", what,
			       ret == -NLE_AGAIN ? "no answer from the kernel" : nl_geterror(ret));
			r->logged = true;
			ret = nle_to_errno(ret);
			goto out_put_cb;
		}
	}
	ret = r->err;
out_put_cb:
	nl_cb_put(cb);
	return ret;
}

static struct nl_msg *new_msg(struct nbd_nl *nl, uint8_t cmd, size_t size)
{
	struct nl_msg *msg = nlmsg_alloc_size(size);

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0, 0, cmd,
			 NBD_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* A request about device index alone (DISCONNECT, STATUS); logged on failure. */
static struct nl_msg *index_msg(struct nbd_nl *nl, uint8_t cmd, int index, const char *what)
{
	struct nl_msg *msg = new_msg(nl, cmd, 256);

	if (!msg || nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)index)) {
		nlmsg_free(msg);
		rb_err("nbd netlink: cannot build the %s request", what);
		return NULL;
	}
	return msg;
}

/* ---- CONNECT ------------------------------------------------------------------ */

static int parse_connect(struct nl_req *r, struct nlattr **tb)
{
	if (tb[NBD_ATTR_INDEX])
		r->index = (int)nla_get_u32(tb[NBD_ATTR_INDEX]);
	return 0;
}

static int put_connect(struct nl_msg *msg, const struct nbd_nl_config *c)
{
	struct nlattr *socks;

	if (c->index >= 0 && nla_put_u32(msg, NBD_ATTR_INDEX, (uint32_t)c->index))
		return -1;
	if (nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, c->size) ||
	    nla_put_u64(msg, NBD_ATTR_BLOCK_SIZE_BYTES, c->block_size) ||
	    nla_put_u64(msg, NBD_ATTR_SERVER_FLAGS, c->server_flags) ||
	    nla_put_u64(msg, NBD_ATTR_TIMEOUT, c->timeout_s) ||
	    nla_put_u64(msg, NBD_ATTR_DEAD_CONN_TIMEOUT, c->dead_conn_timeout_s))
		return -1;
	if (c->backend && nla_put_string(msg, NBD_ATTR_BACKEND_IDENTIFIER, c->backend))
		return -1;
	socks = nla_nest_start(msg, NBD_ATTR_SOCKETS);
	if (!socks)
		return -1;
	for (unsigned int i = 0; i < c->nr_fds; i++) {
		struct nlattr *item = nla_nest_start(msg, NBD_SOCK_ITEM);

		if (!item || nla_put_u32(msg, NBD_SOCK_FD, (uint32_t)c->fds[i]))
			return -1;
		nla_nest_end(msg, item);
	}
	nla_nest_end(msg, socks);
	return 0;
}

static void connect_error(const struct nbd_nl_config *c, int err)
{
	char dev[32];

	if (c->index >= 0)
		snprintf(dev, sizeof(dev), "/dev/nbd%d", c->index);
	else
		snprintf(dev, sizeof(dev), "a free /dev/nbdN");
	switch (-err) {
	case EPERM:
	case EACCES:
		rb_err("nbd netlink: attaching %s: permission denied: configuring NBD devices needs "
		       "CAP_SYS_ADMIN (run as root)",
		       dev);
		break;
	case EBUSY:
		rb_err("nbd netlink: attaching %s: device busy: it is already connected, being set "
		       "up by another program, or still going down (see 'nbd-client -c', dmesg)",
		       dev);
		break;
	case EINVAL:
		rb_err("nbd netlink: attaching %s: the kernel refused the configuration (size %llu, "
		       "block size %llu, flags %#llx, %u sockets): %s; dmesg may say more",
		       dev, (unsigned long long)c->size, (unsigned long long)c->block_size,
		       (unsigned long long)c->server_flags, c->nr_fds, strerror(-err));
		break;
	default:
		rb_err("nbd netlink: attaching %s: %s", dev, strerror(-err));
		break;
	}
}

int nbd_nl_connect(struct nbd_nl *nl, const struct nbd_nl_config *c, int *index)
{
	struct nl_req r = { .parse = parse_connect, .index = -1 };
	size_t size = 1024 + (size_t)c->nr_fds * 32 + (c->backend ? strlen(c->backend) : 0);
	struct nl_msg *msg;
	int ret;

	if (!c->nr_fds)
		return -EINVAL;
	msg = new_msg(nl, NBD_CMD_CONNECT, size);
	if (!msg || put_connect(msg, c)) {
		nlmsg_free(msg);
		rb_err("nbd netlink: cannot build the CONNECT request (%u sockets)", c->nr_fds);
		return -ENOMEM;
	}
	ret = nl_request(nl, msg, &r, "CONNECT");
	if (ret) {
		if (!r.logged)
			connect_error(c, ret);
		return ret;
	}
	if (r.index < 0) {
		if (c->index < 0) {
			/* Connected, but we cannot tell which device: nothing to
			 * disconnect later.  Kernels since 4.12 always reply. */
			rb_err("nbd netlink: CONNECT succeeded without telling the device index");
			return -EPROTO;
		}
		r.index = c->index;
	}
	*index = r.index;
	return 0;
}

/* ---- DISCONNECT and STATUS ------------------------------------------------------- */

int nbd_nl_disconnect(struct nbd_nl *nl, int index)
{
	struct nl_req r = { 0 };
	struct nl_msg *msg;
	int ret;

	msg = index_msg(nl, NBD_CMD_DISCONNECT, index, "DISCONNECT");
	if (!msg)
		return -ENOMEM;
	ret = nl_request(nl, msg, &r, "DISCONNECT");
	if (ret == -EPERM || ret == -EACCES)
		rb_err("nbd netlink: disconnecting /dev/nbd%d: permission denied (needs "
		       "CAP_SYS_ADMIN)",
		       index);
	else if (ret && !r.logged)
		rb_err("nbd netlink: disconnecting /dev/nbd%d: %s", index, strerror(-ret));
	return ret;
}

static int parse_status(struct nl_req *r, struct nlattr **tb)
{
	static const struct nla_policy dev_pol[NBD_DEVICE_ATTR_MAX + 1] = {
		[NBD_DEVICE_INDEX] = { .type = NLA_U32 },
		[NBD_DEVICE_CONNECTED] = { .type = NLA_U8 },
	};
	struct nlattr *item;
	int rem;

	if (!tb[NBD_ATTR_DEVICE_LIST])
		return 0;
	nla_for_each_nested(item, tb[NBD_ATTR_DEVICE_LIST], rem) {
		struct nlattr *dev[NBD_DEVICE_ATTR_MAX + 1];

		if (nla_type(item) != NBD_DEVICE_ITEM ||
		    nla_parse_nested(dev, NBD_DEVICE_ATTR_MAX, item, dev_pol) < 0)
			continue;
		if (!dev[NBD_DEVICE_INDEX] ||
		    (int)nla_get_u32(dev[NBD_DEVICE_INDEX]) != r->want_index)
			continue;
		r->found = true;
		r->connected = dev[NBD_DEVICE_CONNECTED] && nla_get_u8(dev[NBD_DEVICE_CONNECTED]);
	}
	return 0;
}

int nbd_nl_status(struct nbd_nl *nl, int index, bool *connected)
{
	struct nl_req r = { .parse = parse_status, .want_index = index };
	struct nl_msg *msg;
	int ret;

	msg = index_msg(nl, NBD_CMD_STATUS, index, "STATUS");
	if (!msg)
		return -ENOMEM;
	ret = nl_request(nl, msg, &r, "STATUS");
	if (ret) {
		if (!r.logged)
			rb_err("nbd netlink: status of /dev/nbd%d: %s", index, strerror(-ret));
		return ret;
	}
	*connected = r.found && r.connected;
	return 0;
}

#else /* !HAVE_NBD_NETLINK */

int nbd_nl_open(struct nbd_nl **out)
{
	(void)out;
	rb_err("nbd netlink: this rdmablk-initiator was built without libnl-genl-3 and cannot "
	       "attach kernel NBD devices");
	return -EOPNOTSUPP;
}

void nbd_nl_close(struct nbd_nl *nl)
{
	(void)nl;
}

int nbd_nl_connect(struct nbd_nl *nl, const struct nbd_nl_config *c, int *index)
{
	(void)nl;
	(void)c;
	(void)index;
	return -EOPNOTSUPP;
}

int nbd_nl_disconnect(struct nbd_nl *nl, int index)
{
	(void)nl;
	(void)index;
	return -EOPNOTSUPP;
}

int nbd_nl_status(struct nbd_nl *nl, int index, bool *connected)
{
	(void)nl;
	(void)index;
	*connected = false;
	return -EOPNOTSUPP;
}

#endif
