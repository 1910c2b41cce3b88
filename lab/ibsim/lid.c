// SPDX-License-Identifier: GPL-2.0
/*
 * LIDs, as a subnet manager would assign them, and the switch's routes to
 * them.
 *
 * Each port has a base LID and an LMC (IBTA PortInfo): it answers the
 * 2^LMC LIDs from its base (a packet's DLID with its low LMC bits masked
 * must equal the base: qib_ib_rcv, hfi1_16B_ingress_pkt_check), and a
 * packet it sends carries SLID = base | the address vector's source path
 * bits (qib_make_ruc_header and hfi1's 9B header OR them in, hfi1's 16B
 * header masks them by the LMC first: the same for bits inside the LMC,
 * masked here). The responder compares the SLID with its path's DLID
 * exactly (qib/hfi1 *_ruc_check_hdr, fabric.c). A subnet manager gives
 * each LID of a range its own route through the switches, so one route can
 * fail while its siblings carry on: that is what `link LID down` does, per
 * LID. `lmc N` assigns every port 2^N LIDs (the SM's subnet-wide LMC, as
 * OpenSM's lmc option) and raises LID_CHANGE on each port whose LIDs
 * changed, as an HCA does when the SM writes its PortInfo (mlx5:
 * MLX5_PORT_CHANGE_SUBTYPE_LID).
 */
#include "ibsim.h"

/* The base LID of port (1-based) of ibsim<dev> under lmc: LMC 0 gives 1-4. */
u32 ibsim_base_lid(int dev, u32 port, u8 lmc)
{
	return (u32)(dev * IBSIM_NPORT + port) << lmc;
}

/* The port answering lid (any LID of its range), or NULL. */
struct ibsim_port *ibsim_lid_port(u32 lid, struct ibsim_dev **dev, u32 *port)
{
	int i;
	u32 p;

	for (i = 0; i < IBSIM_NDEV; i++) {
		if (!ibsim_devs[i])
			continue;
		for (p = 1; p <= IBSIM_NPORT; p++) {
			struct ibsim_port *pt = &ibsim_devs[i]->port[p];

			if ((lid & ~((1U << pt->lmc) - 1)) == pt->lid) {
				if (dev)
					*dev = ibsim_devs[i];
				if (port)
					*port = p;
				return pt;
			}
		}
	}
	return NULL;
}

bool ibsim_port_alive(struct ibsim_port *p)
{
	return p && p->state == IB_PORT_ACTIVE;
}

/* A packet to lid arrives: its port is ACTIVE and the switch routes to it. */
bool ibsim_lid_alive(u32 lid)
{
	struct ibsim_port *p = ibsim_lid_port(lid, NULL, NULL);

	return ibsim_port_alive(p) && !(p->lids_down & BIT(lid - p->lid));
}

u32 ibsim_ah_slid(struct ibsim_dev *d, u32 port, const struct rdma_ah_attr *ah)
{
	struct ibsim_port *p = &d->port[port];

	return p->lid | (rdma_ah_get_path_bits(ah) & ((1U << p->lmc) - 1));
}

u32 ibsim_slid(struct ibsim_qp *qp)
{
	return ibsim_ah_slid(qp->dev, qp->attr.port_num, &qp->attr.ah_attr);
}

int ibsim_link_set(u32 lid, bool up)
{
	struct ibsim_port *p;

	mutex_lock(&ibsim_mutex);
	p = ibsim_lid_port(lid, NULL, NULL);
	if (p && up)
		p->lids_down &= ~BIT(lid - p->lid);
	else if (p)
		p->lids_down |= BIT(lid - p->lid);
	mutex_unlock(&ibsim_mutex);
	if (!p)
		return -ENOENT;
	ibsim_settle();
	return 0;
}

int ibsim_lmc_set(u32 lmc)
{
	int i;
	u32 p;

	if (lmc > IBSIM_MAX_LMC)
		return -EINVAL;
	mutex_lock(&ibsim_mutex);
	for (i = 0; i < IBSIM_NDEV; i++) {
		for (p = 1; ibsim_devs[i] && p <= IBSIM_NPORT; p++) {
			struct ibsim_port *pt = &ibsim_devs[i]->port[p];

			if (pt->lmc == lmc)
				continue;
			pt->lmc = lmc;
			pt->lid = ibsim_base_lid(i, p, lmc);
			pt->lids_down = 0;
			ibsim_queue_port_event(ibsim_devs[i], p, IB_EVENT_LID_CHANGE);
		}
	}
	mutex_unlock(&ibsim_mutex);
	ibsim_settle();
	return 0;
}
