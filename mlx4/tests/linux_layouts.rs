//! rpmd's ConnectX-3 layouts held against Linux's own: every context,
//! WQE, CQE and EQE field and every command-mailbox offset rpmd
//! transcribed from the digest, at the offset Linux's mlx4 sources give
//! it. The Linux side is `linux-offsets.txt`, made from a Linux / OFED
//! tree by `mlx4/xcheck/linux_layouts.py` (which lays the C structs out
//! as a compiler would); its header names the tree.
use rpmd_mlx4::prm::layout::{
    CqCtx, Cqe, CtrlSeg, DataSeg, EqCtx, Eqe, InitHca, Mgm, Mpt, QpCtx, QpPath, RssCtx,
    SetPortGeneral,
};
use rpmd_mlx4::prm::{dev_cap as d, query_fw as f, query_port as p};
use std::collections::HashMap;
use std::mem::offset_of;

fn linux() -> HashMap<String, usize> {
    include_str!("linux-offsets.txt")
        .lines()
        .filter(|l| !l.starts_with("# ") && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((
                k.trim_start_matches("#define ").to_string(),
                v.parse().ok()?,
            ))
        })
        .collect()
}

fn check(table: &HashMap<String, usize>, ours: &[(&str, usize)]) {
    let mut wrong = Vec::new();
    for &(key, off) in ours {
        match table.get(key) {
            Some(&l) if l == off => {}
            Some(&l) => wrong.push(format!("{key}: rpmd {off:#x}, Linux {l:#x}")),
            None => wrong.push(format!("{key}: not in linux-offsets.txt")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn contexts_and_queue_entries_lie_where_linux_puts_them() {
    let path = offset_of!(QpCtx, path);
    check(
        &linux(),
        &[
            ("mlx4_qp_path sizeof", size_of::<QpPath>()),
            ("mlx4_qp_path fl", offset_of!(QpPath, fl)),
            (
                "mlx4_qp_path vlan_control",
                offset_of!(QpPath, vlan_control),
            ),
            (
                "mlx4_qp_path counter_index",
                offset_of!(QpPath, counter_index),
            ),
            ("mlx4_qp_path ackto", offset_of!(QpPath, ackto)),
            ("mlx4_qp_path sched_queue", offset_of!(QpPath, sched_queue)),
            ("mlx4_qp_path vlan_index", offset_of!(QpPath, vlan_index)),
            ("mlx4_qp_path feup", offset_of!(QpPath, feup)),
            ("mlx4_qp_path dmac", offset_of!(QpPath, dmac)),
            ("mlx4_rss_context sizeof", size_of::<RssCtx>()),
            ("mlx4_rss_context base_qpn", offset_of!(RssCtx, base_qpn)),
            (
                "mlx4_rss_context default_qpn",
                offset_of!(RssCtx, default_qpn),
            ),
            ("mlx4_rss_context hash_fn", offset_of!(RssCtx, hash_fn)),
            ("mlx4_rss_context flags", offset_of!(RssCtx, flags)),
            ("mlx4_rss_context rss_key", offset_of!(RssCtx, rss_key)),
            (
                "mlx4_rss_context base_qpn_udp",
                offset_of!(RssCtx, base_qpn_udp),
            ),
            (
                "MLX4_RSS_OFFSET_IN_QPC_PRI_PATH",
                rpmd_mlx4::prm::qp::RSS_OFFSET_IN_PATH,
            ),
            ("mlx4_qp_context sizeof", size_of::<QpCtx>()),
            ("mlx4_qp_context flags", offset_of!(QpCtx, flags)),
            ("mlx4_qp_context pd", offset_of!(QpCtx, pd)),
            ("mlx4_qp_context mtu_msgmax", offset_of!(QpCtx, mtu_msgmax)),
            (
                "mlx4_qp_context rq_size_stride",
                offset_of!(QpCtx, rq_size_stride),
            ),
            (
                "mlx4_qp_context sq_size_stride",
                offset_of!(QpCtx, sq_size_stride),
            ),
            ("mlx4_qp_context usr_page", offset_of!(QpCtx, usr_page)),
            ("mlx4_qp_context local_qpn", offset_of!(QpCtx, local_qpn)),
            ("mlx4_qp_context pri_path", path),
            (
                "mlx4_qp_context pri_path.sched_queue",
                path + offset_of!(QpPath, sched_queue),
            ),
            ("mlx4_qp_context cqn_send", offset_of!(QpCtx, cqn_send)),
            ("mlx4_qp_context params2", offset_of!(QpCtx, params2)),
            ("mlx4_qp_context cqn_recv", offset_of!(QpCtx, cqn_recv)),
            (
                "mlx4_qp_context db_rec_addr",
                offset_of!(QpCtx, db_rec_addr),
            ),
            ("mlx4_qp_context srqn", offset_of!(QpCtx, srqn)),
            ("mlx4_qp_context param3", offset_of!(QpCtx, param3)),
            (
                "mlx4_qp_context log_page_size",
                offset_of!(QpCtx, log_page_size),
            ),
            ("mlx4_qp_context mtt_base_addr_h", offset_of!(QpCtx, mtt_h)),
            ("mlx4_qp_context mtt_base_addr_l", offset_of!(QpCtx, mtt_l)),
            ("mlx4_wqe_ctrl_seg sizeof", size_of::<CtrlSeg>()),
            (
                "mlx4_wqe_ctrl_seg owner_opcode",
                offset_of!(CtrlSeg, owner_opcode),
            ),
            (
                "mlx4_wqe_ctrl_seg qpn_vlan.vlan_tag",
                offset_of!(CtrlSeg, vlan_tag),
            ),
            (
                "mlx4_wqe_ctrl_seg qpn_vlan.ins_vlan",
                offset_of!(CtrlSeg, ins_vlan),
            ),
            (
                "mlx4_wqe_ctrl_seg qpn_vlan.fence_size",
                offset_of!(CtrlSeg, fence_size),
            ),
            (
                "mlx4_wqe_ctrl_seg srcrb_flags",
                offset_of!(CtrlSeg, srcrb_flags),
            ),
            ("mlx4_wqe_ctrl_seg imm", offset_of!(CtrlSeg, imm)),
            ("mlx4_wqe_data_seg sizeof", size_of::<DataSeg>()),
            (
                "mlx4_wqe_data_seg byte_count",
                offset_of!(DataSeg, byte_count),
            ),
            ("mlx4_wqe_data_seg lkey", offset_of!(DataSeg, lkey)),
            ("mlx4_wqe_data_seg addr", offset_of!(DataSeg, addr)),
            ("mlx4_cqe sizeof", size_of::<Cqe>()),
            ("mlx4_cqe vlan_my_qpn", offset_of!(Cqe, vlan_my_qpn)),
            (
                "mlx4_cqe immed_rss_invalid",
                offset_of!(Cqe, immed_rss_invalid),
            ),
            ("mlx4_cqe g_mlpath_rqpn", offset_of!(Cqe, g_mlpath_rqpn)),
            ("mlx4_cqe sl_vid", offset_of!(Cqe, sl_vid)),
            ("mlx4_cqe rlid", offset_of!(Cqe, rlid)),
            ("mlx4_cqe status", offset_of!(Cqe, status)),
            ("mlx4_cqe ipv6_ext_mask", offset_of!(Cqe, ipv6_ext_mask)),
            ("mlx4_cqe badfcs_enc", offset_of!(Cqe, badfcs_enc)),
            ("mlx4_cqe byte_cnt", offset_of!(Cqe, byte_cnt)),
            ("mlx4_cqe wqe_index", offset_of!(Cqe, wqe_index)),
            ("mlx4_cqe checksum", offset_of!(Cqe, checksum)),
            ("mlx4_cqe owner_sr_opcode", offset_of!(Cqe, owner_sr_opcode)),
            ("mlx4_eqe sizeof", size_of::<Eqe>()),
            ("mlx4_eqe type", offset_of!(Eqe, kind)),
            ("mlx4_eqe subtype", offset_of!(Eqe, subtype)),
            ("mlx4_eqe event", offset_of!(Eqe, data)),
            ("mlx4_eqe slave_id", offset_of!(Eqe, slave_id)),
            ("mlx4_eqe owner", offset_of!(Eqe, owner)),
            ("mlx4_mpt_entry sizeof", size_of::<Mpt>()),
            ("mlx4_mpt_entry flags", offset_of!(Mpt, flags)),
            ("mlx4_mpt_entry qpn", offset_of!(Mpt, qpn)),
            ("mlx4_mpt_entry key", offset_of!(Mpt, key)),
            ("mlx4_mpt_entry pd_flags", offset_of!(Mpt, pd_flags)),
            ("mlx4_mpt_entry start", offset_of!(Mpt, start)),
            ("mlx4_mpt_entry length", offset_of!(Mpt, length)),
            ("mlx4_mpt_entry lkey", offset_of!(Mpt, lkey)),
            ("mlx4_mpt_entry win_cnt", offset_of!(Mpt, win_cnt)),
            ("mlx4_mpt_entry mtt_rep", offset_of!(Mpt, mtt_rep)),
            ("mlx4_mpt_entry mtt_addr", offset_of!(Mpt, mtt_addr_h)),
            ("mlx4_mpt_entry mtt_sz", offset_of!(Mpt, mtt_sz)),
            ("mlx4_mpt_entry entity_size", offset_of!(Mpt, entity_size)),
            (
                "mlx4_mpt_entry first_byte_offset",
                offset_of!(Mpt, first_byte_offset),
            ),
            ("mlx4_eq_context sizeof", size_of::<EqCtx>()),
            ("mlx4_eq_context flags", offset_of!(EqCtx, flags)),
            (
                "mlx4_eq_context page_offset",
                offset_of!(EqCtx, page_offset),
            ),
            (
                "mlx4_eq_context log_eq_size",
                offset_of!(EqCtx, log_eq_size),
            ),
            ("mlx4_eq_context eq_period", offset_of!(EqCtx, eq_period)),
            (
                "mlx4_eq_context eq_max_count",
                offset_of!(EqCtx, eq_max_count),
            ),
            ("mlx4_eq_context intr", offset_of!(EqCtx, intr)),
            (
                "mlx4_eq_context log_page_size",
                offset_of!(EqCtx, log_page_size),
            ),
            ("mlx4_eq_context mtt_base_addr_h", offset_of!(EqCtx, mtt_h)),
            ("mlx4_eq_context mtt_base_addr_l", offset_of!(EqCtx, mtt_l)),
            (
                "mlx4_eq_context consumer_index",
                offset_of!(EqCtx, cons_index),
            ),
            (
                "mlx4_eq_context producer_index",
                offset_of!(EqCtx, prod_index),
            ),
            ("mlx4_cq_context sizeof", size_of::<CqCtx>()),
            ("mlx4_cq_context flags", offset_of!(CqCtx, flags)),
            (
                "mlx4_cq_context page_offset",
                offset_of!(CqCtx, page_offset),
            ),
            (
                "mlx4_cq_context logsize_usrpage",
                offset_of!(CqCtx, logsize_usrpage),
            ),
            ("mlx4_cq_context cq_period", offset_of!(CqCtx, cq_period)),
            (
                "mlx4_cq_context cq_max_count",
                offset_of!(CqCtx, cq_max_count),
            ),
            ("mlx4_cq_context comp_eqn", offset_of!(CqCtx, comp_eqn)),
            (
                "mlx4_cq_context log_page_size",
                offset_of!(CqCtx, log_page_size),
            ),
            ("mlx4_cq_context mtt_base_addr_h", offset_of!(CqCtx, mtt_h)),
            ("mlx4_cq_context mtt_base_addr_l", offset_of!(CqCtx, mtt_l)),
            (
                "mlx4_cq_context last_notified_index",
                offset_of!(CqCtx, last_notified),
            ),
            (
                "mlx4_cq_context solicit_producer_index",
                offset_of!(CqCtx, solicit_producer),
            ),
            (
                "mlx4_cq_context consumer_index",
                offset_of!(CqCtx, cons_index),
            ),
            (
                "mlx4_cq_context producer_index",
                offset_of!(CqCtx, prod_index),
            ),
            (
                "mlx4_cq_context db_rec_addr",
                offset_of!(CqCtx, db_rec_addr),
            ),
            ("mlx4_mgm next_gid_index", offset_of!(Mgm, next_gid_index)),
            ("mlx4_mgm members_count", offset_of!(Mgm, members_count)),
            ("mlx4_mgm gid", offset_of!(Mgm, gid)),
            ("mlx4_mgm qp", offset_of!(Mgm, qp)),
            (
                "mlx4_set_port_general_context sizeof",
                size_of::<SetPortGeneral>(),
            ),
            (
                "mlx4_set_port_general_context flags2",
                offset_of!(SetPortGeneral, flags2),
            ),
            (
                "mlx4_set_port_general_context flags",
                offset_of!(SetPortGeneral, flags),
            ),
            (
                "mlx4_set_port_general_context ignore_fcs",
                offset_of!(SetPortGeneral, ignore_fcs),
            ),
            (
                "mlx4_set_port_general_context mtu",
                offset_of!(SetPortGeneral, mtu),
            ),
            (
                "mlx4_set_port_general_context pptx",
                offset_of!(SetPortGeneral, pptx),
            ),
            (
                "mlx4_set_port_general_context pfctx",
                offset_of!(SetPortGeneral, pfctx),
            ),
            (
                "mlx4_set_port_general_context pprx",
                offset_of!(SetPortGeneral, pprx),
            ),
            (
                "mlx4_set_port_general_context pfcrx",
                offset_of!(SetPortGeneral, pfcrx),
            ),
            (
                "mlx4_set_port_general_context phv_en",
                offset_of!(SetPortGeneral, phv_en),
            ),
            (
                "mlx4_set_port_general_context user_mtu",
                offset_of!(SetPortGeneral, user_mtu),
            ),
            (
                "mlx4_set_port_general_context user_mac",
                offset_of!(SetPortGeneral, user_mac),
            ),
        ],
    );
}

#[test]
fn command_mailboxes_read_where_linux_reads() {
    let q = "QUERY_DEV_CAP_";
    let dev_cap: Vec<(String, usize)> = [
        ("MAX_SRQ_SZ", d::LOG_MAX_SRQ_SZ),
        ("MAX_QP_SZ", d::LOG_MAX_QP_SZ),
        ("RSVD_QP", d::LOG_RSVD_QPS),
        ("MAX_QP", d::LOG_MAX_QPS),
        ("RSVD_SRQ", d::LOG_RSVD_SRQS),
        ("MAX_SRQ", d::LOG_MAX_SRQS),
        ("MAX_CQ_SZ", d::LOG_MAX_CQ_SZ),
        ("RSVD_CQ", d::LOG_RSVD_CQS),
        ("MAX_CQ", d::LOG_MAX_CQS),
        ("MAX_MPT", d::LOG_MAX_MPTS),
        ("RSVD_EQ", d::LOG_RSVD_EQS),
        ("MAX_EQ", d::LOG_MAX_EQS),
        ("RSVD_MTT", d::LOG_RSVD_MTTS),
        ("RSVD_MRW", d::LOG_RSVD_MPTS),
        ("NUM_SYS_EQ", d::NUM_SYS_EQS),
        ("VL_PORT", d::NUM_PORTS),
        // rpmd reads the be64 whose high half is EXT_FLAGS, low FLAGS.
        ("EXT_FLAGS", d::FLAGS),
        ("FLAGS", d::FLAGS + 4),
        ("RSVD_UAR", d::RSVD_UARS),
        ("UAR_SZ", d::LOG_UAR_SZ),
        ("PAGE_SZ", d::LOG_MIN_PAGE),
        ("BF", d::BF),
        ("MAX_SG_SQ", d::MAX_SQ_SG),
        ("MAX_DESC_SZ_SQ", d::MAX_SQ_DESC),
        ("MAX_SG_RQ", d::MAX_RQ_SG),
        ("MAX_DESC_SZ_RQ", d::MAX_RQ_DESC),
        ("MAX_MCG", d::LOG_MAX_MCGS),
        ("RSVD_PD", d::RSVD_PDS),
        ("MAX_PD", d::LOG_MAX_PDS),
        ("EXT_2_FLAGS", d::FLAGS2),
        ("FLOW_STEERING_RANGE_EN", d::FS_EN),
        ("RDMARC_ENTRY_SZ", d::RDMARC_ENTRY),
        ("QPC_ENTRY_SZ", d::QPC_ENTRY),
        ("AUX_ENTRY_SZ", d::AUXC_ENTRY),
        ("ALTC_ENTRY_SZ", d::ALTC_ENTRY),
        ("EQC_ENTRY_SZ", d::EQC_ENTRY),
        ("CQC_ENTRY_SZ", d::CQC_ENTRY),
        ("SRQ_ENTRY_SZ", d::SRQC_ENTRY),
        ("C_MPT_ENTRY_SZ", d::CMPT_ENTRY),
        ("MTT_ENTRY_SZ", d::MTT_ENTRY),
        ("D_MPT_ENTRY_SZ", d::DMPT_ENTRY),
        ("MAX_ICM_SZ", d::MAX_ICM),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{q}{k}_OFFSET"), v))
    .collect();
    let init = |k: &str| format!("INIT_HCA_{k}_OFFSET");
    let mut rest: Vec<(String, usize)> = vec![
        ("QUERY_FW_SIZE_OFFSET".into(), f::FW_PAGES),
        ("QUERY_FW_CMD_IF_REV_OFFSET".into(), f::CMD_IF_REV),
        ("QUERY_FW_MAX_CMD_OFFSET".into(), f::LOG_MAX_CMDS),
        ("QUERY_FW_ERR_START_OFFSET".into(), f::CATAS_BASE),
        ("QUERY_FW_ERR_SIZE_OFFSET".into(), f::CATAS_SIZE),
        ("QUERY_FW_ERR_BAR_OFFSET".into(), f::CATAS_BAR),
        ("QUERY_PORT_SUPPORTED_TYPE_OFFSET".into(), p::LINK),
        ("QUERY_PORT_ETH_MTU_OFFSET".into(), p::ETH_MTU),
        ("QUERY_PORT_MAX_MACVLAN_OFFSET".into(), p::LOG_MAX_VLAN_MAC),
        ("QUERY_PORT_MAC_OFFSET".into(), p::MAC),
    ];
    // A table base is a be64 whose low byte holds its log2 size.
    let low = |field: usize| field + 7;
    for (k, v) in [
        ("VERSION", offset_of!(InitHca, version)),
        ("CACHELINE_SZ", offset_of!(InitHca, cacheline)),
        ("FLAGS", offset_of!(InitHca, flags)),
        ("RECOVERABLE_ERROR_EVENT", offset_of!(InitHca, recoverable)),
        ("QPC_BASE", offset_of!(InitHca, qpc)),
        ("LOG_QP", low(offset_of!(InitHca, qpc))),
        ("SRQC_BASE", offset_of!(InitHca, srqc)),
        ("LOG_SRQ", low(offset_of!(InitHca, srqc))),
        ("CQC_BASE", offset_of!(InitHca, cqc)),
        ("LOG_CQ", low(offset_of!(InitHca, cqc))),
        ("EQE_CQE_STRIDE", offset_of!(InitHca, eqe_cqe) + 3),
        ("ALTC_BASE", offset_of!(InitHca, altc)),
        ("AUXC_BASE", offset_of!(InitHca, auxc)),
        ("EQC_BASE", offset_of!(InitHca, eqc)),
        ("LOG_EQ", low(offset_of!(InitHca, eqc))),
        ("NUM_SYS_EQS", offset_of!(InitHca, num_sys_eqs)),
        ("RDMARC_BASE", offset_of!(InitHca, rdmarc)),
        ("LOG_RD", low(offset_of!(InitHca, rdmarc))),
        ("MC_BASE", offset_of!(InitHca, mc_base)),
        ("LOG_MC_ENTRY_SZ", offset_of!(InitHca, log_mgm_entry)),
        ("LOG_MC_HASH_SZ", offset_of!(InitHca, log_mc_hash)),
        ("UC_STEERING", offset_of!(InitHca, uc_steering)),
        ("LOG_MC_TABLE_SZ", offset_of!(InitHca, log_mc_table)),
        ("DMPT_BASE", offset_of!(InitHca, dmpt_base)),
        ("TPT_MW", offset_of!(InitHca, mw_enable)),
        ("LOG_MPT_SZ", offset_of!(InitHca, log_mpts)),
        ("MTT_BASE", offset_of!(InitHca, mtt_base)),
        ("CMPT_BASE", offset_of!(InitHca, cmpt_base)),
        ("LOG_UAR_SZ", offset_of!(InitHca, log_uar_pages)),
        ("UAR_PAGE_SZ", offset_of!(InitHca, uar_page_sz)),
    ] {
        rest.push((init(k), v));
    }
    let all: Vec<(&str, usize)> = dev_cap
        .iter()
        .chain(&rest)
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    check(&linux(), &all);
}
