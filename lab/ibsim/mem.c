// SPDX-License-Identifier: GPL-2.0
/*
 * Memory regions and the copies the data path makes through them.
 *
 * A user MR pins its pages through ib_umem (as every HCA driver does); a
 * DMA MR (get_dma_mr, a kernel PD's local_dma_lkey) covers every kernel
 * address: ibsim registers no DMA device, so ib_core maps kernel buffers
 * to their virtual addresses (ib_uses_virt_dma), as for rxe and siw.
 * Keys are found through a per-device xarray. Every copy checks the key,
 * the PD, the access flags and the bounds: -EPERM for a wrong key, PD or
 * access, -ERANGE for an access outside the region (both a protection
 * error to the HCA, rvt_lkey_ok/rvt_rkey_ok); -EMSGSIZE for a scatter list
 * too short for the data. Lookups and copies run under ibsim_mutex,
 * which dereg_mr takes too, so a region never goes away under a copy.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <rdma/ib_umem.h>
#include "ibsim.h"

static atomic_t next_key = ATOMIC_INIT(0x100);

/* The umem's scatterlist: sgt_append from 5.15 on, sg_head before. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(5, 15, 0)
#define UMEM_SGL(u) ((u)->sgt_append.sgt.sgl)
#define UMEM_NENTS(u) ((u)->sgt_append.sgt.orig_nents)
#else
#define UMEM_SGL(u) ((u)->sg_head.sgl)
#define UMEM_NENTS(u) ((u)->sg_nents)
#endif

/* kmap_local_page from 5.11 on; nth_page is gone in 7.2 (a page array is contiguous there). */
#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 11, 0)
#define kmap_local_page(p) kmap_atomic(p)
#define kunmap_local(p) kunmap_atomic(p)
#endif
#ifndef nth_page
#define nth_page(p, n) ((p) + (n))
#endif

/* The 7.2 headers name ib_umem_get for a virtual address ib_umem_get_va. */
static struct ib_umem *umem_get(struct ib_device *dev, u64 start, u64 len, int access)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0)
	return ib_umem_get_va(dev, start, len, access);
#else
	return ib_umem_get(dev, start, len, access);
#endif
}

static int flatten_pages(struct ibsim_mr *mr)
{
	struct scatterlist *sg;
	size_t n = 0, want = ib_umem_num_pages(mr->umem);
	unsigned int i, k;

	mr->pages = kvcalloc(want, sizeof(*mr->pages), GFP_KERNEL);
	if (!mr->pages)
		return -ENOMEM;
	for_each_sg(UMEM_SGL(mr->umem), sg, UMEM_NENTS(mr->umem), i) {
		unsigned int np = (sg->offset + sg->length + PAGE_SIZE - 1) >> PAGE_SHIFT;

		for (k = 0; k < np && n < want; k++)
			mr->pages[n++] = nth_page(sg_page(sg), k);
	}
	mr->npages = n;
	return n == want ? 0 : -EFAULT;
}

static struct ibsim_mr *alloc_mr(struct ib_pd *pd, int access)
{
	struct ibsim_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	struct ibsim_dev *d = to_sdev(pd->device);
	u32 key;
	int ret;

	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->access = access;
	key = atomic_inc_return(&next_key);
	mr->ibmr.lkey = mr->ibmr.rkey = key << 8;
	mutex_lock(&ibsim_mutex);
	ret = xa_err(xa_store(&d->mrs, key, mr, GFP_KERNEL));
	mutex_unlock(&ibsim_mutex);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return mr;
}

struct ib_mr *ibsim_get_dma_mr(struct ib_pd *pd, int access)
{
	struct ibsim_mr *mr = alloc_mr(pd, access);

	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->dma = true;
	return &mr->ibmr;
}

struct ib_mr *ibsim_reg_user_mr(struct ib_pd *pd, u64 start, u64 len,
				u64 virt, int access,
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0)
				struct ib_dmah *dmah,
#endif
				struct ib_udata *udata)
{
	struct ib_umem *umem;
	struct ibsim_mr *mr;
	int ret;

	umem = umem_get(pd->device, start, len, access);
	if (IS_ERR(umem))
		return ERR_CAST(umem);
	mr = alloc_mr(pd, access);
	if (IS_ERR(mr)) {
		ib_umem_release(umem);
		return ERR_CAST(mr);
	}
	mr->umem = umem;
	mr->first = start & ~PAGE_MASK;
	mr->ibmr.iova = virt;
	mr->ibmr.length = len;
	ret = flatten_pages(mr);
	if (ret) {
		mutex_lock(&ibsim_mutex);
		xa_erase(&to_sdev(pd->device)->mrs, mr->ibmr.lkey >> 8);
		mutex_unlock(&ibsim_mutex);
		kvfree(mr->pages);
		ib_umem_release(umem);
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

int ibsim_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct ibsim_mr *mr = container_of(ibmr, struct ibsim_mr, ibmr);
	struct ibsim_dev *d = to_sdev(ibmr->device);

	mutex_lock(&ibsim_mutex);
	xa_erase(&d->mrs, ibmr->lkey >> 8);
	mutex_unlock(&ibsim_mutex);
	kvfree(mr->pages);
	if (mr->umem)
		ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/*
 * Under ibsim_mutex: the region key names on d, if it belongs to pd,
 * allows access and holds [addr, addr + len). -EPERM or -ERANGE.
 */
static struct ibsim_mr *find_mr(struct ibsim_dev *d, struct ib_pd *pd, u32 key,
				u64 addr, u32 len, int access, int *err)
{
	struct ibsim_mr *mr = xa_load(&d->mrs, key >> 8);

	*err = -EPERM;
	if (!mr || mr->ibmr.lkey != key || mr->ibmr.pd != pd ||
	    (mr->access & access) != access)
		return NULL;
	*err = -ERANGE;
	if (!mr->dma && (addr < mr->ibmr.iova || len > mr->ibmr.length ||
			 addr - mr->ibmr.iova > mr->ibmr.length - len))
		return NULL;
	*err = 0;
	return mr;
}

/* Copies between buf and [addr, addr + len) of mr; to_mr: into the region. */
static void mr_copy(struct ibsim_mr *mr, u64 addr, void *buf, u32 len, bool to_mr)
{
	u64 off;

	if (mr->dma) {
		if (to_mr)
			memcpy((void *)(uintptr_t)addr, buf, len);
		else
			memcpy(buf, (void *)(uintptr_t)addr, len);
		return;
	}
	off = addr - mr->ibmr.iova + mr->first;
	while (len) {
		struct page *pg = mr->pages[off >> PAGE_SHIFT];
		u32 in = off & ~PAGE_MASK, n = min_t(u32, len, PAGE_SIZE - in);
		u8 *p = kmap_local_page(pg);

		if (to_mr)
			memcpy(p + in, buf, n);
		else
			memcpy(buf, p + in, n);
		kunmap_local(p);
		buf += n;
		off += n;
		len -= n;
	}
}

/*
 * Gathers a local scatter list (lkeys) into buf, or scatters buf into it
 * (to_sges: the receive side, which needs local write). Returns the bytes
 * moved, -EPERM, -ERANGE, or -EMSGSIZE when the list is shorter than len
 * (scatter only).
 */
int ibsim_sge_copy(struct ibsim_qp *qp, const struct ib_sge *sge, int n,
		   void *buf, u32 len, bool to_sges)
{
	int i, err, access = to_sges ? IB_ACCESS_LOCAL_WRITE : 0;
	u32 done = 0;

	for (i = 0; i < n && (to_sges ? done < len : true); i++) {
		u32 part = to_sges ? min(sge[i].length, len - done) : sge[i].length;
		struct ibsim_mr *mr;

		if (!part)
			continue;
		mr = find_mr(qp->dev, qp->ibqp.pd, sge[i].lkey, sge[i].addr,
			     part, access, &err);
		if (!mr)
			return err;
		if (!to_sges && done + part > len)
			return -EMSGSIZE;
		mr_copy(mr, sge[i].addr, buf + done, part, to_sges);
		done += part;
	}
	if (to_sges && done < len)
		return -EMSGSIZE;
	return done;
}

/* Copies to or from the peer's region through an rkey (RDMA WRITE/READ). */
int ibsim_rkey_copy(struct ibsim_qp *qp, u32 rkey, u64 addr, void *buf,
		    u32 len, bool to_mr)
{
	int err, access = to_mr ? IB_ACCESS_REMOTE_WRITE : IB_ACCESS_REMOTE_READ;
	struct ibsim_mr *mr;

	if (!len)
		return 0;
	mr = find_mr(qp->dev, qp->ibqp.pd, rkey, addr, len, access, &err);
	if (!mr)
		return err;
	mr_copy(mr, addr, buf, len, to_mr);
	return 0;
}
