// Prints the uAPI offsets the actuator encodes; its output for each lab kernel
// is testdata/uapi-<kernel>.txt, read by abi_test.go. Regenerate with:
//   mkdir -p inc/rdma && cp /usr/src/linux-headers-<ver>-common/include/uapi/rdma/*.h inc/rdma/
//   gcc -w -Iinc -o offsets offsets.c && ./offsets > uapi-<kernel>.txt
#include <stdio.h>
#include <stddef.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#define P(s,f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
int main(){
printf("ioctl %#lx\n", (unsigned long)RDMA_VERBS_IOCTL);
printf("sizes hdr %zu attr %zu dest %zu modify %zu query %zu resp %zu\n", sizeof(struct ib_uverbs_ioctl_hdr), sizeof(struct ib_uverbs_attr), sizeof(struct ib_uverbs_qp_dest), sizeof(struct ib_uverbs_modify_qp), sizeof(struct ib_uverbs_query_qp), sizeof(struct ib_uverbs_query_qp_resp));
P(ib_uverbs_ioctl_hdr,object_id);P(ib_uverbs_ioctl_hdr,method_id);P(ib_uverbs_ioctl_hdr,num_attrs);P(ib_uverbs_ioctl_hdr,reserved1);P(ib_uverbs_ioctl_hdr,driver_id);P(ib_uverbs_ioctl_hdr,reserved2);
P(ib_uverbs_attr,len);P(ib_uverbs_attr,flags);P(ib_uverbs_attr,attr_data);P(ib_uverbs_attr,data);
P(ib_uverbs_qp_dest,flow_label);P(ib_uverbs_qp_dest,dlid);P(ib_uverbs_qp_dest,sgid_index);P(ib_uverbs_qp_dest,hop_limit);P(ib_uverbs_qp_dest,traffic_class);P(ib_uverbs_qp_dest,sl);P(ib_uverbs_qp_dest,src_path_bits);P(ib_uverbs_qp_dest,static_rate);P(ib_uverbs_qp_dest,is_global);P(ib_uverbs_qp_dest,port_num);
P(ib_uverbs_modify_qp,alt_dest);P(ib_uverbs_modify_qp,qp_handle);P(ib_uverbs_modify_qp,attr_mask);P(ib_uverbs_modify_qp,alt_pkey_index);P(ib_uverbs_modify_qp,qp_state);P(ib_uverbs_modify_qp,cur_qp_state);P(ib_uverbs_modify_qp,path_mig_state);P(ib_uverbs_modify_qp,port_num);P(ib_uverbs_modify_qp,alt_port_num);P(ib_uverbs_modify_qp,alt_timeout);
P(ib_uverbs_query_qp,qp_handle);P(ib_uverbs_query_qp,attr_mask);
P(ib_uverbs_query_qp_resp,alt_dest);P(ib_uverbs_query_qp_resp,rq_psn);P(ib_uverbs_query_qp_resp,sq_psn);P(ib_uverbs_query_qp_resp,dest_qp_num);P(ib_uverbs_query_qp_resp,pkey_index);P(ib_uverbs_query_qp_resp,alt_pkey_index);P(ib_uverbs_query_qp_resp,qp_state);P(ib_uverbs_query_qp_resp,path_mtu);P(ib_uverbs_query_qp_resp,path_mig_state);P(ib_uverbs_query_qp_resp,port_num);P(ib_uverbs_query_qp_resp,timeout);P(ib_uverbs_query_qp_resp,alt_port_num);P(ib_uverbs_query_qp_resp,alt_timeout);
printf("cmds %d %d\n", IB_USER_VERBS_CMD_QUERY_QP, IB_USER_VERBS_CMD_MODIFY_QP);
return 0;}
