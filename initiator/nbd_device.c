/* SPDX-License-Identifier: MIT */
/*
 * Kernel /dev/nbdN attach: socket pairs, netlink CONNECT/DISCONNECT, the
 * request size limit, and the bounded waits around detach.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nbd_device.h"
#include "nbd_netlink.h"

/* The kernel's timeout must fire only after ours: a request may wait for
 * slots and then for its command, each up to the command timeout, and
 * besides that for a reconnect (ctrl-loss-tmo). */
#define KERNEL_TIMEOUT_SLACK_S 5
/* Nothing ever reconnects a socket (no NBD_CMD_RECONFIGURE): once every
 * socket is dead, fail I/O at once instead of waiting for a new one. */
#define DEAD_CONN_TIMEOUT_S 0

struct nbd_kdev {
	struct nbd_nl *nl;
	int index; /* -1: auto, until attached */
	char name[32];
	bool attached, disconnected;
};

bool nbd_kdev_name_ok(const char *s)
{
	int index;

	return nbd_parse_device(s, &index) == 0;
}

const char *nbd_kdev_name(const struct nbd_kdev *d)
{
	return d->name;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- sysfs ---------------------------------------------------------------------- */

static int sysfs_read_u64(const char *path, uint64_t *v)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	if (sscanf(buf, "%" SCNu64, v) != 1)
		return -EIO;
	return 0;
}

static int sysfs_write_u64(const char *path, uint64_t v)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", v);
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, buf, (size_t)len);
	if (n < 0)
		ret = -errno;
	else if (n != len)
		ret = -EIO;
	close(fd);
	return ret;
}

/*
 * The NBD server takes READ/WRITE up to max_payload bytes per request (a
 * request must fit in its queue's slots); the kernel would send up to
 * max_hw_sectors_kb.  Lower max_sectors_kb before anything but the
 * kernel's own small probes (partition scan, udev) can reach the device.
 */
static int limit_request_size(const struct nbd_kdev *d, uint32_t max_payload)
{
	char path[128];
	uint64_t cur, want = max_payload / 1024;
	int ret;

	snprintf(path, sizeof(path), "/sys/block/nbd%d/queue/max_sectors_kb", d->index);
	ret = sysfs_read_u64(path, &cur);
	if (ret) {
		rb_err("%s: cannot read %s: %s", d->name, path, strerror(-ret));
		return ret;
	}
	if (cur <= want) {
		rb_dbg("%s: max_sectors_kb %" PRIu64 " fits %u-byte requests", d->name, cur,
		       max_payload);
		return 0;
	}
	ret = sysfs_write_u64(path, want);
	if (ret) {
		/* E.g. systemd's ProtectKernelTunables= makes /sys read-only. */
		rb_err("%s: cannot limit requests to %" PRIu64 " KiB (%s): %s; the kernel would "
		       "send up to %" PRIu64 " KiB: give a larger --queue-depth (one request may "
		       "use half a queue's slots) or let us write to /sys",
		       d->name, want, path, strerror(-ret), cur);
		return ret;
	}
	rb_info("%s: requests limited to %" PRIu64 " KiB (kernel default %" PRIu64 " KiB)",
		d->name, want, cur);
	return 0;
}

/* The kernel makes one hardware queue per socket but no more than it has
 * CPUs; socket i serves hardware queue i, so the others stay idle. */
static void report_hw_queues(const struct nbd_kdev *d, unsigned int nq)
{
	char path[128];
	unsigned int n = 0;
	DIR *dir;
	struct dirent *de;

	snprintf(path, sizeof(path), "/sys/block/nbd%d/mq", d->index);
	dir = opendir(path);
	if (!dir)
		return;
	while ((de = readdir(dir)))
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			n++;
	closedir(dir);
	if (n && n < nq)
		rb_warn("%s: the kernel made %u hardware queues (at most one per CPU): I/O queues "
			"%u..%u get no kernel I/O; use --queues %u",
			d->name, n, n + 1, nq, n);
}

/* ---- attach ----------------------------------------------------------------------- */

static void close_fds(int *fds, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* One pair per queue; our end goes to the server (which owns it from then
 * on), the kernel's end into kfds. */
static int make_sockets(struct nbd_server *srv, struct ini_session *s, int *kfds, unsigned int nq)
{
	for (unsigned int i = 0; i < nq; i++) {
		char desc[64];
		int sv[2], ret;

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			ret = -errno;
			rb_err("nbd device: socketpair: %s", strerror(errno));
			return ret;
		}
		if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
			ret = -errno;
			rb_err("nbd device: O_NONBLOCK: %s", strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return ret;
		}
		kfds[i] = sv[1];
		snprintf(desc, sizeof(desc), "kernel nbd socket %u", i);
		ret = nbd_server_add_client(srv, sv[0], rb_session_queue(s, i), false, desc);
		if (ret) {
			rb_err("nbd device: cannot serve socket %u: %s", i, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int fill_config(struct nbd_nl_config *c, const struct nbd_export_desc *e, int index,
		       uint32_t timeout_ms, uint32_t hold_ms)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t bs = e->min_block < 512 ? 512 : e->min_block;

	if (page <= 0)
		page = 4096;
	if (bs > (uint64_t)page) {
		rb_err("nbd device: the export's block size %" PRIu64 " is larger than the page "
		       "size (%ld): the kernel NBD driver cannot use it",
		       bs, page);
		return -EINVAL;
	}
	/* max_sectors_kb cannot go below one page. */
	if (e->max_payload < (uint64_t)page) {
		rb_err("nbd device: requests are limited to %u bytes here, less than a page: "
		       "raise --queue-depth",
		       e->max_payload);
		return -EINVAL;
	}
	memset(c, 0, sizeof(*c));
	c->index = index;
	c->block_size = bs;
	c->size = e->size - e->size % bs;
	if (c->size != e->size)
		rb_warn("nbd device: export size %" PRIu64 " is not a multiple of %" PRIu64
			"; the device shows %" PRIu64 " bytes",
			e->size, bs, c->size);
	if (!c->size) {
		rb_err("nbd device: the export is smaller than one %" PRIu64 "-byte block", bs);
		return -EINVAL;
	}
	c->server_flags = e->tflags;
	c->timeout_s = (2ull * timeout_ms + hold_ms + 999) / 1000 + KERNEL_TIMEOUT_SLACK_S;
	c->dead_conn_timeout_s = DEAD_CONN_TIMEOUT_S;
	return 0;
}

int nbd_kdev_open(const char *device, struct nbd_kdev **out)
{
	struct nbd_kdev *d;
	bool connected = false;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (nbd_parse_device(device, &d->index)) {
		rb_err("nbd device: '%s' is not /dev/nbdN or auto", device);
		ret = -EINVAL;
		goto out_free;
	}
	snprintf(d->name, sizeof(d->name), "%s", device);
	ret = nbd_nl_open(&d->nl);
	if (ret)
		goto out_free;
	if (d->index >= 0) {
		ret = nbd_nl_status(d->nl, d->index, &connected);
		if (!ret && connected) {
			rb_err("%s is busy: it is already connected (to another server, or still "
			       "held open after a disconnect)",
			       d->name);
			ret = -EBUSY;
		}
		if (ret)
			goto out_close_nl;
	}
	*out = d;
	return 0;

out_close_nl:
	nbd_nl_close(d->nl);
out_free:
	free(d);
	return ret;
}

int nbd_kdev_attach(struct nbd_kdev *d, struct nbd_server *srv, struct ini_session *s,
		    uint32_t timeout_ms, uint32_t hold_ms)
{
	const struct nbd_export_desc *e = nbd_server_export(srv);
	unsigned int nq = rb_session_nr_queues(s);
	struct nbd_nl_config c;
	char backend[512];
	bool connected = false;
	int index = d->index, *kfds, ret;

	ret = fill_config(&c, e, d->index, timeout_ms, hold_ms);
	if (ret)
		return ret;
	kfds = malloc(nq * sizeof(*kfds));
	if (!kfds)
		return -ENOMEM;
	for (unsigned int i = 0; i < nq; i++)
		kfds[i] = -1;
	/* Our ends see EOF once the kernel's ends close: failure paths below
	 * only close kfds and the server drops those clients by itself. */
	ret = make_sockets(srv, s, kfds, nq);
	if (ret)
		goto out_close_fds;
	snprintf(backend, sizeof(backend), "rdmablk:%s/%s", rb_session_target(s), e->name);
	c.backend = backend;
	c.fds = kfds;
	c.nr_fds = nq;
	ret = nbd_nl_connect(d->nl, &c, &index);
	if (ret)
		goto out_close_fds;
	/* The kernel holds its own references now. */
	close_fds(kfds, nq);
	free(kfds);
	kfds = NULL;
	d->index = index;
	snprintf(d->name, sizeof(d->name), "/dev/nbd%d", index);

	ret = nbd_nl_status(d->nl, index, &connected);
	if (!ret && !connected) {
		rb_err("%s: CONNECT succeeded but the kernel reports the device not connected",
		       d->name);
		ret = -EIO;
	}
	if (ret)
		goto out_disconnect;
	ret = limit_request_size(d, e->max_payload);
	if (ret)
		goto out_disconnect;
	rb_info("%s: connected: %" PRIu64 " bytes, block size %" PRIu64 ", flags %#" PRIx64
		", %u sockets, kernel timeout %" PRIu64 " s",
		d->name, c.size, c.block_size, c.server_flags, nq, c.timeout_s);
	report_hw_queues(d, nq);
	d->attached = true;
	return 0;

out_disconnect:
	nbd_nl_disconnect(d->nl, index);
out_close_fds:
	if (kfds)
		close_fds(kfds, nq);
	free(kfds);
	return ret;
}

bool nbd_kdev_gone(struct nbd_kdev *d)
{
	bool connected = true;

	if (!d->attached)
		return false;
	return nbd_nl_status(d->nl, d->index, &connected) == 0 && !connected;
}

/* ---- detach ----------------------------------------------------------------------- */

/* Data written to /dev/nbdN through the page cache and not yet synced would
 * be dropped with the device: write it back and flush the export first.
 * Every command is bounded by the session's timeouts, so this is too. */
static void flush_device(const struct nbd_kdev *d)
{
	int fd = open(d->name, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		rb_warn("%s: cannot open it to flush before disconnecting: %s", d->name,
			strerror(errno));
		return;
	}
	if (fsync(fd) < 0)
		rb_warn("%s: flush before disconnect failed: %s", d->name, strerror(errno));
	close(fd);
}

void nbd_kdev_disconnect(struct nbd_kdev *d)
{
	if (!d || !d->attached || d->disconnected)
		return;
	d->disconnected = true;
	flush_device(d);
	rb_info("%s: disconnecting", d->name);
	nbd_nl_disconnect(d->nl, d->index);
}

bool nbd_kdev_wait_gone(struct nbd_kdev *d, uint32_t ms)
{
	uint32_t waited = 0;

	if (!d || !d->attached)
		return true;
	for (;;) {
		bool connected = true;
		int ret = nbd_nl_status(d->nl, d->index, &connected);

		if (ret)
			return false; /* logged */
		if (!connected) {
			rb_info("%s: detached", d->name);
			return true;
		}
		if (waited >= ms)
			break;
		sleep_ms(100);
		waited += 100;
	}
	rb_warn("%s: still configured %u ms after the disconnect: something keeps it open "
		"(mounted?); its I/O fails until it is closed",
		d->name, ms);
	return false;
}

void nbd_kdev_free(struct nbd_kdev *d)
{
	if (!d)
		return;
	nbd_nl_close(d->nl);
	free(d);
}
