// Prints the uAPI sizes and offsets internal/uverbs encodes; its output for each
// lab kernel is testdata/uapi-<kernel>.txt, read by the unit tests. Regenerate with:
//   mkdir -p inc/rdma && cp /usr/src/linux-headers-<ver>-common/include/uapi/rdma/*.h inc/rdma/
//   gcc -w -Iinc -o offsets offsets.c && ./offsets > uapi-<kernel>.txt
#include <stdio.h>
#include <stddef.h>
#include <rdma/ib_user_verbs.h>
#define S(s) printf("size." #s " %zu\n", sizeof(struct s))
#define P(s,f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
#define C(c) printf("cmd." #c " %d\n", c)
#define V(v) printf("val." #v " %d\n", v)
int main(void)
{
	S(ib_uverbs_cmd_hdr); P(ib_uverbs_cmd_hdr,command); P(ib_uverbs_cmd_hdr,in_words); P(ib_uverbs_cmd_hdr,out_words);
	S(ib_uverbs_get_context); S(ib_uverbs_get_context_resp); P(ib_uverbs_get_context_resp,async_fd); P(ib_uverbs_get_context_resp,num_comp_vectors);
	S(ib_uverbs_alloc_pd); S(ib_uverbs_alloc_pd_resp); P(ib_uverbs_alloc_pd_resp,pd_handle);
	S(ib_uverbs_dealloc_pd); P(ib_uverbs_dealloc_pd,pd_handle);
	S(ib_uverbs_create_cq); P(ib_uverbs_create_cq,user_handle); P(ib_uverbs_create_cq,cqe); P(ib_uverbs_create_cq,comp_vector); P(ib_uverbs_create_cq,comp_channel);
	S(ib_uverbs_create_cq_resp); P(ib_uverbs_create_cq_resp,cq_handle); P(ib_uverbs_create_cq_resp,cqe);
	S(ib_uverbs_destroy_cq); P(ib_uverbs_destroy_cq,cq_handle); S(ib_uverbs_destroy_cq_resp);
	S(ib_uverbs_create_qp); P(ib_uverbs_create_qp,user_handle); P(ib_uverbs_create_qp,pd_handle); P(ib_uverbs_create_qp,send_cq_handle); P(ib_uverbs_create_qp,recv_cq_handle); P(ib_uverbs_create_qp,srq_handle); P(ib_uverbs_create_qp,max_send_wr); P(ib_uverbs_create_qp,max_recv_wr); P(ib_uverbs_create_qp,max_send_sge); P(ib_uverbs_create_qp,max_recv_sge); P(ib_uverbs_create_qp,max_inline_data); P(ib_uverbs_create_qp,sq_sig_all); P(ib_uverbs_create_qp,qp_type); P(ib_uverbs_create_qp,is_srq);
	S(ib_uverbs_create_qp_resp); P(ib_uverbs_create_qp_resp,qp_handle); P(ib_uverbs_create_qp_resp,qpn);
	S(ib_uverbs_destroy_qp); P(ib_uverbs_destroy_qp,qp_handle); S(ib_uverbs_destroy_qp_resp);
	S(ib_uverbs_qp_dest); P(ib_uverbs_qp_dest,flow_label); P(ib_uverbs_qp_dest,dlid); P(ib_uverbs_qp_dest,sgid_index); P(ib_uverbs_qp_dest,hop_limit); P(ib_uverbs_qp_dest,traffic_class); P(ib_uverbs_qp_dest,sl); P(ib_uverbs_qp_dest,src_path_bits); P(ib_uverbs_qp_dest,static_rate); P(ib_uverbs_qp_dest,is_global); P(ib_uverbs_qp_dest,port_num);
	S(ib_uverbs_modify_qp); P(ib_uverbs_modify_qp,dest); P(ib_uverbs_modify_qp,alt_dest); P(ib_uverbs_modify_qp,qp_handle); P(ib_uverbs_modify_qp,attr_mask); P(ib_uverbs_modify_qp,qkey); P(ib_uverbs_modify_qp,rq_psn); P(ib_uverbs_modify_qp,sq_psn); P(ib_uverbs_modify_qp,dest_qp_num); P(ib_uverbs_modify_qp,qp_access_flags); P(ib_uverbs_modify_qp,pkey_index); P(ib_uverbs_modify_qp,alt_pkey_index); P(ib_uverbs_modify_qp,qp_state); P(ib_uverbs_modify_qp,cur_qp_state); P(ib_uverbs_modify_qp,path_mtu); P(ib_uverbs_modify_qp,path_mig_state); P(ib_uverbs_modify_qp,en_sqd_async_notify); P(ib_uverbs_modify_qp,max_rd_atomic); P(ib_uverbs_modify_qp,max_dest_rd_atomic); P(ib_uverbs_modify_qp,min_rnr_timer); P(ib_uverbs_modify_qp,port_num); P(ib_uverbs_modify_qp,timeout); P(ib_uverbs_modify_qp,retry_cnt); P(ib_uverbs_modify_qp,rnr_retry); P(ib_uverbs_modify_qp,alt_port_num); P(ib_uverbs_modify_qp,alt_timeout);
	S(ib_uverbs_query_qp); P(ib_uverbs_query_qp,qp_handle); P(ib_uverbs_query_qp,attr_mask);
	S(ib_uverbs_query_qp_resp); P(ib_uverbs_query_qp_resp,dest); P(ib_uverbs_query_qp_resp,alt_dest); P(ib_uverbs_query_qp_resp,rq_psn); P(ib_uverbs_query_qp_resp,sq_psn); P(ib_uverbs_query_qp_resp,dest_qp_num); P(ib_uverbs_query_qp_resp,pkey_index); P(ib_uverbs_query_qp_resp,alt_pkey_index); P(ib_uverbs_query_qp_resp,qp_state); P(ib_uverbs_query_qp_resp,path_mtu); P(ib_uverbs_query_qp_resp,path_mig_state); P(ib_uverbs_query_qp_resp,port_num); P(ib_uverbs_query_qp_resp,timeout); P(ib_uverbs_query_qp_resp,alt_port_num); P(ib_uverbs_query_qp_resp,alt_timeout);
	S(ib_uverbs_post_send); P(ib_uverbs_post_send,qp_handle); P(ib_uverbs_post_send,wr_count); P(ib_uverbs_post_send,sge_count); P(ib_uverbs_post_send,wqe_size); P(ib_uverbs_post_send,send_wr);
	S(ib_uverbs_send_wr); P(ib_uverbs_send_wr,wr_id); P(ib_uverbs_send_wr,num_sge); P(ib_uverbs_send_wr,opcode); P(ib_uverbs_send_wr,send_flags); P(ib_uverbs_send_wr,wr);
	S(ib_uverbs_post_send_resp); P(ib_uverbs_post_send_resp,bad_wr);
	S(ib_uverbs_post_recv); P(ib_uverbs_post_recv,qp_handle); P(ib_uverbs_post_recv,wr_count); P(ib_uverbs_post_recv,sge_count); P(ib_uverbs_post_recv,wqe_size); P(ib_uverbs_post_recv,recv_wr);
	S(ib_uverbs_recv_wr); P(ib_uverbs_recv_wr,wr_id); P(ib_uverbs_recv_wr,num_sge);
	S(ib_uverbs_post_recv_resp);
	S(ib_uverbs_poll_cq); P(ib_uverbs_poll_cq,cq_handle); P(ib_uverbs_poll_cq,ne);
	S(ib_uverbs_poll_cq_resp); P(ib_uverbs_poll_cq_resp,count); P(ib_uverbs_poll_cq_resp,wc);
	S(ib_uverbs_wc); P(ib_uverbs_wc,wr_id); P(ib_uverbs_wc,status); P(ib_uverbs_wc,opcode); P(ib_uverbs_wc,vendor_err); P(ib_uverbs_wc,byte_len); P(ib_uverbs_wc,qp_num); P(ib_uverbs_wc,src_qp); P(ib_uverbs_wc,wc_flags); P(ib_uverbs_wc,pkey_index); P(ib_uverbs_wc,slid); P(ib_uverbs_wc,sl); P(ib_uverbs_wc,dlid_path_bits); P(ib_uverbs_wc,port_num);
	S(ib_uverbs_async_event_desc); P(ib_uverbs_async_event_desc,element); P(ib_uverbs_async_event_desc,event_type);
	C(IB_USER_VERBS_CMD_GET_CONTEXT); C(IB_USER_VERBS_CMD_ALLOC_PD); C(IB_USER_VERBS_CMD_DEALLOC_PD); C(IB_USER_VERBS_CMD_CREATE_CQ); C(IB_USER_VERBS_CMD_POLL_CQ); C(IB_USER_VERBS_CMD_DESTROY_CQ); C(IB_USER_VERBS_CMD_CREATE_QP); C(IB_USER_VERBS_CMD_QUERY_QP); C(IB_USER_VERBS_CMD_MODIFY_QP); C(IB_USER_VERBS_CMD_DESTROY_QP); C(IB_USER_VERBS_CMD_POST_SEND); C(IB_USER_VERBS_CMD_POST_RECV);
	V(IB_UVERBS_WR_SEND); S(ib_uverbs_sge);
	return 0;
}
