// SPDX-License-Identifier: GPL-2.0
/*
 * The simulated fabric: one switch routing by DLID to the four ports, the
 * "packets" RC/UC QPs exchange, failures, and the async events they raise.
 *
 * A "packet" carries no payload, only what APM needs: it travels from a
 * sender in RTS over its primary path (local port -> DLID) to the QP named
 * by its dest_qp_num on the DLID's device, and carries MigReq=1 when the
 * sender is MIGRATED, MigReq=0 when it is REARM or ARMED (IBTA). Packets
 * flow every tick_ms from every QP whose traffic is on (default), or once
 * per poke. On arrival:
 *   - in RTR, the first packet raises COMM_EST;
 *   - REARM + MigReq=0 on the primary path -> ARMED;
 *   - ARMED + MigReq=1 on the alternate path: the peer migrated, so does
 *     this QP (paths swap, MIGRATED, PATH_MIG);
 *   - after a migration, the first packet on the new path raises COMM_EST.
 * A failure (a port DOWN, or the switch's route to a LID down) is seen at
 * once by every RC/UC QP in RTS/SQD whose primary path crosses it: ARMED
 * with a live alternate -> migrates (PATH_MIG); ARMED with a dead or never
 * loaded alternate -> PATH_MIG_ERR, then ERR; not ARMED -> ERR with a
 * retry-exceeded completion on its send CQ. A QP sending over a dead
 * primary at a tick meets the same fate.
 *
 * Datagrams (GSI, UD) are in dgram.c.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_mad.h>
#include "ibsim.h"

static unsigned int tick_ms = 50;
module_param(tick_ms, uint, 0444);
MODULE_PARM_DESC(tick_ms, "interval of the simulated RC traffic (ms)");

bool ibsim_traffic = true;

struct ibsim_ev {
	struct list_head list;
	struct ibsim_qp *qp;		/* NULL: a port event */
	struct ibsim_dev *dev;
	u32 port;
	enum ib_event_type type;
};


#define EVLOG_LEN 256
static struct {
	u64 seq;
	int dev;
	u32 qpn, port;
	bool is_qp;
	int type;
} evlog[EVLOG_LEN];
static u64 evlog_next;

static LIST_HEAD(ev_list);
static DEFINE_SPINLOCK(ev_lock);
static struct work_struct ev_work;
static struct delayed_work tick_work;
static bool stopping;

static const char *const event_names[] = {
	[IB_EVENT_CQ_ERR] = "CQ_ERR",
	[IB_EVENT_QP_FATAL] = "QP_FATAL",
	[IB_EVENT_QP_REQ_ERR] = "QP_REQ_ERR",
	[IB_EVENT_QP_ACCESS_ERR] = "QP_ACCESS_ERR",
	[IB_EVENT_COMM_EST] = "COMM_EST",
	[IB_EVENT_SQ_DRAINED] = "SQ_DRAINED",
	[IB_EVENT_PATH_MIG] = "PATH_MIG",
	[IB_EVENT_PATH_MIG_ERR] = "PATH_MIG_ERR",
	[IB_EVENT_DEVICE_FATAL] = "DEVICE_FATAL",
	[IB_EVENT_PORT_ACTIVE] = "PORT_ACTIVE",
	[IB_EVENT_PORT_ERR] = "PORT_ERR",
};

static const char *event_name(int e)
{
	if (e < 0 || e >= ARRAY_SIZE(event_names) || !event_names[e])
		return "OTHER";
	return event_names[e];
}

/* --- the switch --- */

struct ibsim_port *ibsim_lid_port(u32 lid, struct ibsim_dev **dev, u32 *port)
{
	int i;
	u32 p;

	for (i = 0; i < IBSIM_NDEV; i++) {
		if (!ibsim_devs[i])
			continue;
		for (p = 1; p <= IBSIM_NPORT; p++) {
			if (ibsim_devs[i]->port[p].lid == lid) {
				if (dev)
					*dev = ibsim_devs[i];
				if (port)
					*port = p;
				return &ibsim_devs[i]->port[p];
			}
		}
	}
	return NULL;
}

bool ibsim_port_alive(struct ibsim_port *p)
{
	return p && p->state == IB_PORT_ACTIVE && p->link_up;
}

bool ibsim_lid_alive(u32 lid)
{
	return ibsim_port_alive(ibsim_lid_port(lid, NULL, NULL));
}

static bool path_alive(struct ibsim_qp *qp, bool alt)
{
	u32 port = alt ? qp->attr.alt_port_num : qp->attr.port_num;
	struct rdma_ah_attr *ah = alt ? &qp->attr.alt_ah_attr : &qp->attr.ah_attr;

	if (port < 1 || port > IBSIM_NPORT)
		return false;
	return ibsim_port_alive(&qp->dev->port[port]) &&
		ibsim_lid_alive(rdma_ah_get_dlid(ah));
}

static bool connected_type(struct ibsim_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RC || qp->ibqp.qp_type == IB_QPT_UC;
}

static struct ibsim_qp *find_qp(struct ibsim_dev *d, u32 qpn)
{
	struct ibsim_qp *qp;

	list_for_each_entry(qp, &ibsim_qps, list)
		if (qp->dev == d && qp->ibqp.qp_num == qpn &&
		    qp->ibqp.qp_type != IB_QPT_GSI)
			return qp;
	return NULL;
}

/* --- events --- */

static void queue_ev(struct ibsim_qp *qp, struct ibsim_dev *d, u32 port,
		     enum ib_event_type type)
{
	struct ibsim_ev *e = kzalloc(sizeof(*e), GFP_KERNEL);
	unsigned long flags;

	if (!e) {
		pr_warn_ratelimited("ibsim: event %s lost (no memory)\n",
				    event_name(type));
		return;
	}
	e->qp = qp;
	e->dev = d;
	e->port = port;
	e->type = type;
	spin_lock_irqsave(&ev_lock, flags);
	list_add_tail(&e->list, &ev_list);
	spin_unlock_irqrestore(&ev_lock, flags);
}

void ibsim_queue_qp_event(struct ibsim_qp *qp, enum ib_event_type type)
{
	queue_ev(qp, qp->dev, 0, type);
}

void ibsim_queue_port_event(struct ibsim_dev *d, u32 port,
			    enum ib_event_type type)
{
	queue_ev(NULL, d, port, type);
}

void ibsim_kick_events(void)
{
	queue_work(ibsim_wq, &ev_work);
}

static void log_ev(struct ibsim_ev *e)
{
	unsigned long flags;
	int i;

	spin_lock_irqsave(&ev_lock, flags);
	i = evlog_next % EVLOG_LEN;
	evlog[i].seq = evlog_next++;
	evlog[i].dev = e->dev->index;
	evlog[i].is_qp = e->qp != NULL;
	evlog[i].qpn = e->qp ? e->qp->ibqp.qp_num : 0;
	evlog[i].port = e->port;
	evlog[i].type = e->type;
	spin_unlock_irqrestore(&ev_lock, flags);
}

/* Raises queued events, one at a time, as a driver's event path does. */
static void ev_fn(struct work_struct *w)
{
	struct ibsim_ev *e;
	struct ib_event ev;

	for (;;) {
		spin_lock_irq(&ev_lock);
		e = list_first_entry_or_null(&ev_list, struct ibsim_ev, list);
		if (e)
			list_del(&e->list);
		spin_unlock_irq(&ev_lock);
		if (!e)
			return;
		memset(&ev, 0, sizeof(ev));
		ev.device = &e->dev->ibdev;
		ev.event = e->type;
		log_ev(e);
		if (e->qp) {
			ev.element.qp = &e->qp->ibqp;
			if (e->qp->ibqp.event_handler)
				e->qp->ibqp.event_handler(&ev,
						e->qp->ibqp.qp_context);
		} else {
			ev.element.port_num = e->port;
			ib_dispatch_event(&ev);
		}
		kfree(e);
	}
}

/* Under ibsim_mutex: nothing queued may name qp any more. */
void ibsim_forget_qp(struct ibsim_qp *qp)
{
	struct ibsim_ev *e, *en;

	spin_lock_irq(&ev_lock);
	list_for_each_entry_safe(e, en, &ev_list, list) {
		if (e->qp == qp) {
			list_del(&e->list);
			kfree(e);
		}
	}
	spin_unlock_irq(&ev_lock);
	ibsim_dgram_forget(qp);
}

/* --- RC/UC "packets" and failures (all under ibsim_mutex) --- */

/* The primary path of an RC/UC QP in RTS/SQD died: what the HCA does. */
static void primary_died(struct ibsim_qp *qp)
{
	if (qp->attr.path_mig_state == IB_MIG_ARMED) {
		if (qp->alt_valid && path_alive(qp, true)) {
			ibsim_migrate(qp);
			return;
		}
		ibsim_queue_qp_event(qp, IB_EVENT_PATH_MIG_ERR);
	}
	ibsim_to_error(qp, IB_WC_RETRY_EXC_ERR);
}

static bool sending(struct ibsim_qp *qp)
{
	return connected_type(qp) && (qp->attr.qp_state == IB_QPS_RTS ||
				      qp->attr.qp_state == IB_QPS_SQD);
}

static void check_primary(struct ibsim_qp *qp)
{
	if (sending(qp) && !path_alive(qp, false))
		primary_died(qp);
}

/* One packet from s to its peer; true if it arrived. */
static bool send_packet(struct ibsim_qp *s)
{
	struct ibsim_dev *dd;
	struct ibsim_qp *d;
	u32 dport, slid;
	bool migreq, on_primary, on_alt;

	if (!sending(s))
		return false;
	if (!path_alive(s, false)) {
		primary_died(s);
		return false;
	}
	if (!ibsim_lid_port(rdma_ah_get_dlid(&s->attr.ah_attr), &dd, &dport))
		return false;
	d = find_qp(dd, s->attr.dest_qp_num);
	if (!d || d->ibqp.qp_type != s->ibqp.qp_type ||
	    d->attr.dest_qp_num != s->ibqp.qp_num ||
	    d->attr.qp_state < IB_QPS_RTR || d->attr.qp_state > IB_QPS_SQD)
		return false;
	slid = s->dev->port[s->attr.port_num].lid;
	on_primary = dport == d->attr.port_num &&
		rdma_ah_get_dlid(&d->attr.ah_attr) == slid;
	on_alt = d->alt_valid && dport == d->attr.alt_port_num &&
		rdma_ah_get_dlid(&d->attr.alt_ah_attr) == slid;
	if (!on_primary && !on_alt)
		return false;	/* not a path d knows: dropped */
	s->tx++;
	d->rx++;
	migreq = s->attr.path_mig_state == IB_MIG_MIGRATED;
	if (d->attr.qp_state == IB_QPS_RTR && !d->rtr_packet) {
		d->rtr_packet = true;
		ibsim_queue_qp_event(d, IB_EVENT_COMM_EST);
	}
	if (!on_primary) {
		/* on the alternate: only a migrated peer's packet is taken */
		if (d->attr.path_mig_state != IB_MIG_ARMED || !migreq)
			return false;
		ibsim_migrate(d);
	} else if (d->attr.path_mig_state == IB_MIG_REARM && !migreq) {
		d->attr.path_mig_state = IB_MIG_ARMED;
	}
	if (d->comm_est_pending) {
		d->comm_est_pending = false;
		ibsim_queue_qp_event(d, IB_EVENT_COMM_EST);
	}
	return true;
}

static void tick_fn(struct work_struct *w)
{
	struct ibsim_qp *qp;

	mutex_lock(&ibsim_mutex);
	if (ibsim_traffic)
		list_for_each_entry(qp, &ibsim_qps, list)
			if (qp->traffic)
				send_packet(qp);
	mutex_unlock(&ibsim_mutex);
	ev_fn(NULL);	/* same ordered queue: raise them now */
	if (!READ_ONCE(stopping))
		queue_delayed_work(ibsim_wq, &tick_work,
				   msecs_to_jiffies(tick_ms ? tick_ms : 1));
}

static void check_all(void)
{
	struct ibsim_qp *qp;

	list_for_each_entry(qp, &ibsim_qps, list)
		check_primary(qp);
}

/* Runs the queued events before a control write returns. */
static void settle(void)
{
	ibsim_kick_events();
	flush_workqueue(ibsim_wq);
}

static struct ibsim_dev *dev_at(int i)
{
	return i >= 0 && i < IBSIM_NDEV ? ibsim_devs[i] : NULL;
}

int ibsim_port_set(int dev, u32 port, bool up)
{
	struct ibsim_dev *d = dev_at(dev);
	enum ib_port_state want = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;

	if (!d)
		return -ENODEV;
	if (port < 1 || port > IBSIM_NPORT)
		return -EINVAL;
	mutex_lock(&ibsim_mutex);
	if (d->port[port].state != want) {
		d->port[port].state = want;
		ibsim_queue_port_event(d, port, up ? IB_EVENT_PORT_ACTIVE :
				       IB_EVENT_PORT_ERR);
		if (!up)
			check_all();
	}
	mutex_unlock(&ibsim_mutex);
	settle();
	return 0;
}

int ibsim_link_set(u32 lid, bool up)
{
	struct ibsim_port *p;

	mutex_lock(&ibsim_mutex);
	p = ibsim_lid_port(lid, NULL, NULL);
	if (p) {
		p->link_up = up;
		if (!up)
			check_all();
	}
	mutex_unlock(&ibsim_mutex);
	if (!p)
		return -ENOENT;
	settle();
	return 0;
}

/* Under ibsim_mutex: QP qpn of device dev; NULL with *err ENODEV or ENOENT. */
struct ibsim_qp *ibsim_qp_at(int dev, u32 qpn, int *err)
{
	struct ibsim_qp *qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;

	if (!qp)
		*err = dev_at(dev) ? -ENOENT : -ENODEV;
	return qp;
}

int ibsim_traffic_set(int dev, int qpn, bool on)
{
	struct ibsim_qp *qp;
	int ret = 0;

	mutex_lock(&ibsim_mutex);
	if (qpn < 0) {
		ibsim_traffic = on;
	} else {
		qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;
		if (qp)
			qp->traffic = on;
		else
			ret = dev_at(dev) ? -ENOENT : -ENODEV;
	}
	mutex_unlock(&ibsim_mutex);
	return ret;
}

int ibsim_poke(int dev, int qpn)
{
	struct ibsim_qp *qp;
	int ret = 0;

	mutex_lock(&ibsim_mutex);
	if (qpn < 0) {
		list_for_each_entry(qp, &ibsim_qps, list)
			send_packet(qp);
	} else {
		qp = dev_at(dev) ? find_qp(dev_at(dev), qpn) : NULL;
		if (qp)
			send_packet(qp);
		else
			ret = dev_at(dev) ? -ENOENT : -ENODEV;
	}
	mutex_unlock(&ibsim_mutex);
	settle();
	return ret;
}

static const char *const port_states[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};

static const char *qp_type_name(enum ib_qp_type t)
{
	switch (t) {
	case IB_QPT_RC: return "RC";
	case IB_QPT_UC: return "UC";
	case IB_QPT_UD: return "UD";
	case IB_QPT_GSI: return "GSI";
	default: return "OTHER";
	}
}

void ibsim_show(struct seq_file *m)
{
	struct ibsim_qp *qp;
	int i;
	u32 p;

	mutex_lock(&ibsim_mutex);
	seq_printf(m, "{\"traffic\":%s,\"tick_ms\":%u}\n",
		   ibsim_traffic ? "true" : "false", tick_ms);
	for (i = 0; i < IBSIM_NDEV; i++) {
		for (p = 1; ibsim_devs[i] && p <= IBSIM_NPORT; p++) {
			struct ibsim_port *pt = &ibsim_devs[i]->port[p];

			seq_printf(m, "{\"dev\":\"ibsim%d\",\"port\":%u,\"lid\":%u,\"state\":\"%s\",\"link\":\"%s\",\"sm_lid\":%u}\n",
				   i, p, pt->lid, pt->state < ARRAY_SIZE(port_states) ?
				   port_states[pt->state] : "?",
				   pt->link_up ? "up" : "down", IBSIM_SM_LID);
		}
	}
	list_for_each_entry(qp, &ibsim_qps, list) {
		struct ib_qp_attr *a = &qp->attr;

		seq_printf(m, "{\"dev\":\"ibsim%d\",\"qpn\":%u,\"type\":\"%s\",\"owner\":\"%s\",\"state\":\"%s\",\"path_mig_state\":\"%s\"",
			   qp->dev->index, qp->ibqp.qp_num,
			   qp_type_name(qp->ibqp.qp_type),
			   qp->ibqp.uobject ? "user" : "kernel",
			   ibsim_qps_name(a->qp_state),
			   ibsim_mig_name(a->path_mig_state));
		if (connected_type(qp))
			seq_printf(m, ",\"port\":%u,\"dlid\":%u,\"dest_qpn\":%u,\"alt_valid\":%s,\"alt_port\":%u,\"alt_dlid\":%u,\"traffic\":%s,\"tx\":%llu,\"rx\":%llu,\"migrations\":%llu",
				   a->port_num, rdma_ah_get_dlid(&a->ah_attr),
				   a->dest_qp_num, qp->alt_valid ? "true" : "false",
				   a->alt_port_num,
				   rdma_ah_get_dlid(&a->alt_ah_attr),
				   qp->traffic ? "true" : "false", qp->tx, qp->rx,
				   qp->migrations);
		else
			seq_printf(m, ",\"port\":%u", qp->port ? qp->port : a->port_num);
		seq_puts(m, "}\n");
	}
	mutex_unlock(&ibsim_mutex);
}

void ibsim_events_show(struct seq_file *m)
{
	u64 first, s;
	int i;

	spin_lock_irq(&ev_lock);
	first = evlog_next > EVLOG_LEN ? evlog_next - EVLOG_LEN : 0;
	for (s = first; s < evlog_next; s++) {
		i = s % EVLOG_LEN;
		if (evlog[i].is_qp)
			seq_printf(m, "{\"seq\":%llu,\"dev\":\"ibsim%d\",\"qpn\":%u,\"event\":\"%s\",\"event_num\":%d}\n",
				   evlog[i].seq, evlog[i].dev, evlog[i].qpn,
				   event_name(evlog[i].type), evlog[i].type);
		else
			seq_printf(m, "{\"seq\":%llu,\"dev\":\"ibsim%d\",\"port\":%u,\"event\":\"%s\",\"event_num\":%d}\n",
				   evlog[i].seq, evlog[i].dev, evlog[i].port,
				   event_name(evlog[i].type), evlog[i].type);
	}
	spin_unlock_irq(&ev_lock);
}

int ibsim_fabric_init(void)
{
	INIT_WORK(&ev_work, ev_fn);
	ibsim_dgram_init();
	INIT_DELAYED_WORK(&tick_work, tick_fn);
	queue_delayed_work(ibsim_wq, &tick_work, msecs_to_jiffies(tick_ms));
	return 0;
}

void ibsim_fabric_exit(void)
{
	WRITE_ONCE(stopping, true);
	cancel_delayed_work_sync(&tick_work);
	flush_workqueue(ibsim_wq);
}
