/* Slots: the uid range, addresses and veth name of a live sandbox, held
 * host-wide through lock files (see below). */
#include "sandbox/sandbox.h"
#include "sandbox/internal.h"

#include "core/log.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/mount.h>

/* ---- slots: uid range, addresses and veth name of a live sandbox ----
 *
 * Several runner processes (and the CLI) may share a host, so a slot is owned
 * through a host-wide lock file: flock is released by the kernel when the
 * owner dies, and whoever takes the slot next clears what a dead owner left
 * (cgroup, veth). Nobody ever touches a slot it does not hold.
 *
 * A process keeps holding a slot after its sandbox is gone, with what can be
 * reused by the slot's next sandbox: the network namespace (net.c) and the
 * idmapped mount's user namespace. Slots held this way are taken first; all
 * are let go at shutdown. */

#define SB_SLOTS_MAX 16384

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static sb_slot slots[SB_SLOTS_MAX];

void sb_slots_init(void)
{
	for (int i = 0; i < SB_SLOTS_MAX; i++)
		slots[i] = (sb_slot){ .lock = -1, .idmap = -1, .netns = -1 };
}

static int lock_slot(int i)
{
	char path[64];
	snprintf(path, sizeof path, SB_LOCK_DIR "/slot-%d.lock", i);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void fill_slot(sb_plan *p)
{
	unsigned base = (sb_g.net_a << 24) | (sb_g.net_b << 16) | ((unsigned)p->slot * 4);
	p->host_ip = htonl(base + 1);
	p->sb_ip = htonl(base + 2);
	p->uid_base = sb_g.uid_base + (unsigned)p->slot * SB_IDS_PER_SLOT;
	snprintf(p->veth, sizeof p->veth, "ahs%d", p->slot);
}

/* A free slot: one we hold already if any, else one we can lock. */
static int pick_slot(bool *fresh)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < sb_g.max_slots; i++) {
			sb_slot *s = &slots[i];
			if (s->used || (pass == 0) != (s->lock >= 0))
				continue;
			if (pass == 1 && (s->lock = lock_slot(i)) < 0)
				continue;
			s->used = true;
			*fresh = pass == 1;
			return i;
		}
	return -1;
}

int sb_slot_take(ah_sandbox *sb, ah_err *err)
{
	sb_plan *p = &sb->plan;
	bool fresh = false;
	pthread_mutex_lock(&slot_mu);
	p->slot = pick_slot(&fresh);
	pthread_mutex_unlock(&slot_mu);
	if (p->slot < 0)
		return ah_err_set(err, AH_ETOOBIG, "all %d sandbox slots are in use", sb_g.max_slots);
	fill_slot(p);
	if (fresh) {
		sb_cgroup_clear_slot(sb);
		sb_net_host_teardown(p);
	}
	return 0;
}

/* At init: clear every slot whose owner died (runner killed), so that no
 * crashed run's cgroup or veth waits for its slot to be reused. */
void sb_slots_sweep(void)
{
	ah_sandbox tmp = { 0 };
	for (int i = 0; i < sb_g.max_slots; i++) {
		char path[64];
		snprintf(path, sizeof path, SB_LOCK_DIR "/slot-%d.lock", i);
		if (access(path, F_OK) < 0)
			continue;
		int fd = lock_slot(i);
		if (fd < 0)
			continue;
		tmp.plan.slot = i;
		fill_slot(&tmp.plan);
		sb_cgroup_clear_slot(&tmp);
		sb_net_host_teardown(&tmp.plan);
		close(fd);
	}
}

/* The sandbox is gone; we keep the slot (see above). */
void sb_slot_release(ah_sandbox *sb)
{
	pthread_mutex_lock(&slot_mu);
	if (sb->plan.slot >= 0)
		slots[sb->plan.slot].used = false;
	pthread_mutex_unlock(&slot_mu);
}

/* Shutdown: every slot we hold goes, with what it kept. */
void sb_slots_let_go(void)
{
	for (int i = 0; i < SB_SLOTS_MAX; i++) {
		sb_slot *s = &slots[i];
		if (s->lock < 0 || s->used)
			continue;
		sb_plan p = { .slot = i };
		fill_slot(&p);
		sb_net_slot_drop(&p, &s->netns);
		if (s->idmap >= 0)
			close(s->idmap);
		close(s->lock);
		*s = (sb_slot){ .lock = -1, .idmap = -1, .netns = -1 };
	}
}

sb_slot *sb_slot_of(const ah_sandbox *sb)
{
	return &slots[sb->plan.slot];
}
