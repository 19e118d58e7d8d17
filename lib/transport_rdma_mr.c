/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport: domains (one PD per device, shared and refcounted)
 * and memory regions.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "checked.h"
#include "log.h"
#include "transport_rdma_priv.h"

static pthread_mutex_t rd_dom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rd_domain *rd_domains;

/* ---- domains ---------------------------------------------------------------- */

/*
 * Take librdmacm's reference on one device: rdma_get_devices() counts one
 * on every device it lists and rdma_free_devices() drops one for each
 * context in the list it is given, so the entry for verbs moves to a list
 * of its own, released when the domain goes.  NULL: not a live device.
 */
static struct ibv_context **dev_ref_get(struct ibv_context *verbs)
{
	struct ibv_context **all, **mine;
	int n = 0, k = 0;

	all = rdma_get_devices(&n);
	if (!all)
		return NULL;
	mine = calloc(2, sizeof(*mine));
	for (int i = 0; i < n; i++) {
		if (mine && !mine[0] && all[i] == verbs)
			mine[0] = verbs;
		else
			all[k++] = all[i];
	}
	all[k] = NULL;
	rdma_free_devices(all);
	if (mine && !mine[0]) {
		free(mine);
		mine = NULL;
	}
	return mine;
}

/* The domain of a device, created on first use.  librdmacm keeps one
 * ibv_context per device open, so the context pointer identifies it. */
int rd_dom_get(struct ibv_context *verbs, struct rd_domain **out)
{
	struct rd_domain *d;
	int ret;

	if (!verbs)
		return -ENODEV;
	pthread_mutex_lock(&rd_dom_lock);
	for (d = rd_domains; d; d = d->next)
		if (d->verbs == verbs && !__atomic_load_n(&d->lost, __ATOMIC_ACQUIRE))
			break;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			ret = -ENOMEM;
			goto out_unlock;
		}
		d->verbs = verbs;
		snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(verbs->device));
		d->devref = dev_ref_get(verbs);
		if (!d->devref) {
			ret = -ENODEV;
			rb_err("rdma: device %s is not (or no longer) present", d->name);
			goto out_free;
		}
		ret = ibv_query_device(verbs, &d->attr);
		if (ret) {
			ret = -ret;
			rb_err("rdma: query device %s: %s", d->name, strerror(-ret));
			goto out_put_dev;
		}
		d->pd = ibv_alloc_pd(verbs);
		if (!d->pd) {
			ret = errno ? -errno : -ENOMEM;
			rb_err("rdma: allocate protection domain on %s: %s", d->name,
			       strerror(-ret));
			goto out_put_dev;
		}
		rb_dbg("rdma: domain on %s (max_qp_wr %d, max_sge %d, max_cqe %d, rd_atom %d/%d)",
		       d->name, d->attr.max_qp_wr, d->attr.max_sge, d->attr.max_cqe,
		       d->attr.max_qp_rd_atom, d->attr.max_qp_init_rd_atom);
		d->next = rd_domains;
		rd_domains = d;
	}
	d->refs++;
	*out = d;
	pthread_mutex_unlock(&rd_dom_lock);
	return 0;

out_put_dev:
	rdma_free_devices(d->devref);
out_free:
	free(d);
out_unlock:
	pthread_mutex_unlock(&rd_dom_lock);
	return ret;
}

void rd_dom_hold(struct rd_domain *d)
{
	pthread_mutex_lock(&rd_dom_lock);
	d->refs++;
	pthread_mutex_unlock(&rd_dom_lock);
}

/* Lets librdmacm see removed devices: one that is gone and unreferenced
 * has its context closed here (the kernel's removal waits for that). */
static void dev_sync(void)
{
	struct ibv_context **list = rdma_get_devices(NULL);

	if (list)
		rdma_free_devices(list);
}

void rd_dom_put(struct rd_domain *d)
{
	struct rd_domain **pp;
	bool lost;
	int ret;

	if (!d)
		return;
	pthread_mutex_lock(&rd_dom_lock);
	if (--d->refs) {
		pthread_mutex_unlock(&rd_dom_lock);
		return;
	}
	for (pp = &rd_domains; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	pthread_mutex_unlock(&rd_dom_lock);
	ret = ibv_dealloc_pd(d->pd);
	if (ret)
		rb_err("rdma: free protection domain on %s: %s", d->name, strerror(ret));
	/* Last: librdmacm may close the context now. */
	rdma_free_devices(d->devref);
	lost = __atomic_load_n(&d->lost, __ATOMIC_ACQUIRE);
	if (lost)
		rb_info("rdma: released everything held on removed device %s", d->name);
	free(d);
	if (lost)
		dev_sync();
}

/* The device is gone (a DEVICE_REMOVAL event, or missing from a rescan). */
void rd_dom_lose(struct rd_domain *d, const char *how)
{
	if (d && !__atomic_exchange_n(&d->lost, true, __ATOMIC_ACQ_REL))
		rb_err("rdma: device %s was removed (%s): releasing what is held on it", d->name,
		       how);
}

/* transport op: a rescan, and domains whose device it did not list are lost. */
void rd_rescan(void)
{
	struct ibv_context **list;
	struct rd_domain *d;
	int n = 0;

	list = rdma_get_devices(&n);
	/* NULL also when no device is left: librdmacm then cannot sync
	 * (see docs/transport-rdma.md); domains learn it from CM events. */
	if (!list)
		return;
	pthread_mutex_lock(&rd_dom_lock);
	for (d = rd_domains; d; d = d->next) {
		int i = 0;

		while (i < n && list[i] != d->verbs)
			i++;
		if (i == n)
			rd_dom_lose(d, "no longer listed");
	}
	pthread_mutex_unlock(&rd_dom_lock);
	rdma_free_devices(list);
}

bool rd_domain_lost(struct rb_domain *d)
{
	return __atomic_load_n(&((struct rd_domain *)d)->lost, __ATOMIC_ACQUIRE);
}

/* No device named: the first one librdmacm knows. */
int rd_domain_open(const struct rb_transport_opts *opts, struct rb_domain **out)
{
	struct ibv_context **list;
	int n = 0, ret;

	(void)opts;
	list = rdma_get_devices(&n);
	if (!list || n <= 0) {
		if (list)
			rdma_free_devices(list);
		rb_err("rdma: no RDMA devices found");
		return -ENODEV;
	}
	ret = rd_dom_get(list[0], (struct rd_domain **)out);
	rdma_free_devices(list);
	return ret;
}

void rd_domain_close(struct rb_domain *d)
{
	rd_dom_put((struct rd_domain *)d);
}

/* ---- memory regions --------------------------------------------------------- */

static void memlock_hint(const struct rd_domain *d, size_t len, int err)
{
	struct rlimit rl;
	char cur[32] = "unknown";

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(cur, sizeof(cur), "unlimited");
		else
			snprintf(cur, sizeof(cur), "%llu KiB",
				 (unsigned long long)rl.rlim_cur / 1024);
	}
	rb_err("rdma %s: cannot register %zu bytes of memory: %s; the locked-memory limit "
	       "(RLIMIT_MEMLOCK) is %s: raise it (ulimit -l unlimited, or LimitMEMLOCK=infinity "
	       "in the systemd unit)",
	       d->name, len, strerror(err), cur);
}

int rd_reg_mr(struct rb_domain *rd, void *addr, size_t len, unsigned int access,
	      struct rb_mr **out)
{
	struct rd_domain *d = (struct rd_domain *)rd;
	int flags = IBV_ACCESS_LOCAL_WRITE, ret;
	uintptr_t end;
	struct rd_mr *m;

	if (!d || !addr || !len || !out ||
	    (access & ~(RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE)) ||
	    rb_add_overflow((uintptr_t)addr, len, &end))
		return -EINVAL;
	if (access & RB_ACCESS_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & RB_ACCESS_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	errno = 0;
	m->mr = ibv_reg_mr(d->pd, addr, len, flags);
	if (!m->mr) {
		ret = errno ? -errno : -ENOMEM;
		if (ret == -ENOMEM || ret == -EPERM)
			memlock_hint(d, len, -ret);
		else
			rb_err("rdma %s: cannot register %zu bytes of memory: %s", d->name, len,
			       strerror(-ret));
		free(m);
		return ret;
	}
	m->pub.addr = addr;
	m->pub.length = len;
	m->pub.lkey = m->mr->lkey;
	m->pub.rkey = access ? m->mr->rkey : 0;
	m->pub.access = access;
	m->pub.domain = rd;
	rd_dom_hold(d);
	*out = &m->pub;
	return 0;
}

void rd_dereg_mr(struct rb_mr *pub)
{
	struct rd_mr *m = (struct rd_mr *)pub;
	struct rd_domain *d;
	int ret;

	if (!m)
		return;
	d = (struct rd_domain *)m->pub.domain;
	ret = ibv_dereg_mr(m->mr);
	if (ret)
		rb_err("rdma %s: deregister %zu bytes: %s", d->name, m->pub.length, strerror(ret));
	free(m);
	rd_dom_put(d);
}
