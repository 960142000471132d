//! rpmd's ConnectX-3 definitions held against Linux's own, at test time:
//! every context, WQE, CQE and EQE field and every command-mailbox offset
//! rpmd transcribed (`mlx4/src/prm/`), and the opcodes, status codes,
//! register and doorbell offsets and flag bits inside fields. The Linux
//! side is extracted from Debian's `linux-source` package when the test
//! runs (`include/linux/mlx4/` and `drivers/net/ethernet/mellanox/mlx4/`),
//! the definitions each check reaches are cut out of those files and
//! compiled with stub kernel types, and a mismatch fails and names the
//! definition. No kernel source is committed. Without the package the
//! test reports its peer missing (a failure under `CI=true`).
use rpmd_mlx4::prm::layout::{
    CqCtx, Cqe, CtrlSeg, DataSeg, EqCtx, Eqe, InitHca, Mgm, Mpt, QpCtx, QpPath, RssCtx,
    SetPortGeneral,
};
use rpmd_mlx4::prm::{self, dev_cap as d, query_fw as f, query_port as p};
use rpmd_pmd::testing::linux_source::{Check, Definitions, LinuxSource, KERNEL_STUBS};
use std::mem::offset_of;

/// The files the definitions come from, headers first.
const FILES: [&str; 21] = [
    "include/linux/mlx4/cmd.h",
    "include/linux/mlx4/device.h",
    "include/linux/mlx4/cq.h",
    "include/linux/mlx4/qp.h",
    "include/linux/mlx4/doorbell.h",
    "drivers/net/ethernet/mellanox/mlx4/mlx4.h",
    "drivers/net/ethernet/mellanox/mlx4/fw.h",
    "drivers/net/ethernet/mellanox/mlx4/en_port.h",
    "drivers/net/ethernet/mellanox/mlx4/mlx4_stats.h",
    "drivers/net/ethernet/mellanox/mlx4/mlx4_en.h",
    "drivers/net/ethernet/mellanox/mlx4/fw.c",
    "drivers/net/ethernet/mellanox/mlx4/cmd.c",
    "drivers/net/ethernet/mellanox/mlx4/eq.c",
    "drivers/net/ethernet/mellanox/mlx4/cq.c",
    "drivers/net/ethernet/mellanox/mlx4/port.c",
    "drivers/net/ethernet/mellanox/mlx4/mcg.c",
    "drivers/net/ethernet/mellanox/mlx4/mr.c",
    "drivers/net/ethernet/mellanox/mlx4/reset.c",
    "drivers/net/ethernet/mellanox/mlx4/main.c",
    "drivers/net/ethernet/mellanox/mlx4/en_tx.c",
    "drivers/net/ethernet/mellanox/mlx4/en_port.c",
];

/// rpmd's layout offsets, keyed as `STRUCT FIELD` (`union NAME FIELD`),
/// `STRUCT sizeof`, or a bare Linux constant.
fn layout(v: &mut Vec<Check>, ours: &[(&str, usize)]) {
    for &(key, off) in ours {
        let key = key.trim_start_matches("#define ");
        let expr = match key.rsplit_once(' ') {
            None => key.to_string(),
            Some((ty, "sizeof")) => format!("sizeof({})", c_type(ty)),
            Some((ty, field)) => format!("offsetof({}, {field})", c_type(ty)),
        };
        v.push(Check::new(key, off as u64, expr));
    }
}

fn c_type(ty: &str) -> String {
    if ty.starts_with("union ") {
        ty.to_string()
    } else {
        format!("struct {ty}")
    }
}

/// Contexts, queue entries and mailboxes: sizes and field offsets.
fn layouts(v: &mut Vec<Check>) {
    let path = offset_of!(QpCtx, path);
    layout(
        v,
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

/// The command mailboxes' offsets, as fw.c `#define`s them.
fn mailboxes(v: &mut Vec<Check>) {
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
    layout(v, &all);
}

/// DUMP_ETH_STATS's output mailbox (`struct mlx4_en_stat_out_mbox`).
fn eth_stats(v: &mut Vec<Check>) {
    use prm::eth_stats as es;
    let mbox = |f: &str| format!("offsetof(struct mlx4_en_stat_out_mbox, {f})");
    for (n, ours, c) in [
        (
            "SIZE",
            es::SIZE,
            "sizeof(struct mlx4_en_stat_out_mbox)".to_string(),
        ),
        ("RX_FRAMES", es::RX_FRAMES, mbox("RTOT_prio_0")),
        (
            "RX_FRAMES + PRIO_STRIDE",
            es::RX_FRAMES + es::PRIO_STRIDE,
            mbox("RTOT_prio_1"),
        ),
        (
            "RX_FRAMES, last slot",
            es::RX_FRAMES + (es::PRIO_SLOTS - 1) * es::PRIO_STRIDE,
            mbox("RTOT_novlan"),
        ),
        (
            "RX_OCTETS, last slot",
            es::RX_OCTETS + (es::PRIO_SLOTS - 1) * es::PRIO_STRIDE,
            mbox("ROCT_novlan"),
        ),
        (
            "TX_FRAMES, last slot",
            es::TX_FRAMES + (es::PRIO_SLOTS - 1) * es::PRIO_STRIDE,
            mbox("TTOT_novlan"),
        ),
        (
            "TX_OCTETS, last slot",
            es::TX_OCTETS + (es::PRIO_SLOTS - 1) * es::PRIO_STRIDE,
            mbox("TOCT_novlan"),
        ),
        ("RX_OCTETS", es::RX_OCTETS, mbox("ROCT_prio_0")),
        ("TX_FRAMES", es::TX_FRAMES, mbox("TTOT_prio_0")),
        ("TX_OCTETS", es::TX_OCTETS, mbox("TOCT_prio_0")),
        ("RX_CRC_ERRORS", es::RX_CRC_ERRORS, mbox("RCRC")),
        ("RX_DROPPED", es::RX_DROPPED, mbox("RDROP")),
        ("RX_OVERFLOW", es::RX_OVERFLOW, mbox("RdropOvflw")),
        ("RX_BAD_LENGTH", es::RX_BAD_LENGTH, mbox("RdropLength")),
        ("TX_DROPPED", es::TX_DROPPED, mbox("TDROP")),
        ("PRIO_SLOTS", es::PRIO_SLOTS, "NUM_PRIORITIES".to_string()),
    ] {
        v.push(Check::new(format!("eth_stats::{n}"), ours as u64, c));
    }
}

/// Command opcodes, by the name rpmd gives each (`op::name`): Linux's
/// `MLX4_CMD_<name>` must carry the same value.
fn opcodes(v: &mut Vec<Check>) {
    use prm::op::*;
    for op in [
        QUERY_DEV_CAP,
        QUERY_FW,
        QUERY_ADAPTER,
        INIT_HCA,
        CLOSE_HCA,
        INIT_PORT,
        CLOSE_PORT,
        SET_PORT,
        QUERY_PORT,
        NOP,
        MOD_STAT_CFG,
        RUN_FW,
        UNMAP_ICM,
        MAP_ICM,
        UNMAP_ICM_AUX,
        MAP_ICM_AUX,
        SET_ICM_SIZE,
        UNMAP_FA,
        MAP_FA,
        SW2HW_MPT,
        HW2SW_MPT,
        WRITE_MTT,
        MAP_EQ,
        SW2HW_EQ,
        HW2SW_EQ,
        SW2HW_CQ,
        HW2SW_CQ,
        RST2INIT_QP,
        INIT2RTR_QP,
        RTR2RTS_QP,
        TO_ERR_QP,
        TO_RST_QP,
        QUERY_QP,
        CONF_SPECIAL_QP,
        READ_MCG,
        WRITE_MCG,
        MGID_HASH,
        MODIFY_CQ,
        SET_MCAST_FLTR,
        DUMP_ETH_STATS,
        SENSE_PORT,
    ] {
        let name = name(op);
        v.push(Check::new(name, op.into(), format!("MLX4_CMD_{name}")));
    }
}

/// Command status codes: the ones rpmd acts on by name, and every code
/// its table names (`status::name`), at Linux's `CMD_STAT_*` values.
fn statuses(v: &mut Vec<Check>) {
    use prm::status::*;
    for (ours, linux) in [
        (OK, "OK"),
        (BAD_OP, "BAD_OP"),
        (BAD_PARAM, "BAD_PARAM"),
        (BAD_SYS_STATE, "BAD_SYS_STATE"),
        (BAD_RESOURCE, "BAD_RESOURCE"),
        (EXCEEDS_LIMITS, "EXCEED_LIM"),
        (BAD_RES_STATE, "BAD_RES_STATE"),
        (BAD_INDEX, "BAD_INDEX"),
        (ICM_ERROR, "ICM_ERROR"),
        (BAD_QP_STATE, "BAD_QP_STATE"),
    ] {
        v.push(Check::new(
            name(ours),
            ours.into(),
            format!("CMD_STAT_{linux}"),
        ));
    }
    for (code, linux) in [
        (0x01, "INTERNAL_ERR"),
        (0x06, "RESOURCE_BUSY"),
        (0x0b, "BAD_NVMEM"),
        (0x20, "BAD_SEG_PARAM"),
        (0x21, "REG_BOUND"),
        (0x22, "LAM_NOT_PRE"),
        (0x30, "BAD_PKT"),
        (0x40, "BAD_SIZE"),
        (0x50, "MULTI_FUNC_REQ"),
    ] {
        assert_ne!(
            name(code),
            "unknown status",
            "status {code:#x} ({linux}) has no name"
        );
        v.push(Check::new(
            name(code),
            code.into(),
            format!("CMD_STAT_{linux}"),
        ));
    }
}

/// BAR0 registers, HCR bits, doorbells and the firmware constants.
fn registers(v: &mut Vec<Check>) {
    use prm::{bar0, hcr, init_hca, mod_stat_cfg, page_list, query_adapter, uar};
    let mut add = |n: &str, ours: u64, c: &str| v.push(Check::new(n, ours, c));
    add("bar0::HCR", bar0::HCR, "MLX4_HCR_BASE");
    add("bar0::HCR_SIZE", bar0::HCR_SIZE, "MLX4_HCR_SIZE");
    add("bar0::OWNERSHIP", bar0::OWNERSHIP, "MLX4_OWNER_BASE");
    add(
        "bar0::RESET",
        bar0::RESET,
        "MLX4_RESET_BASE + MLX4_RESET_OFFSET",
    );
    add(
        "bar0::SEMAPHORE",
        bar0::SEMAPHORE,
        "MLX4_RESET_BASE + MLX4_SEM_OFFSET",
    );
    add("hcr::GO", hcr::GO.into(), "1u << HCR_GO_BIT");
    add("hcr::EVENT", hcr::EVENT.into(), "1u << HCR_E_BIT");
    add("hcr::TOGGLE", hcr::TOGGLE.into(), "1u << HCR_T_BIT");
    add(
        "hcr::OP_MOD_SHIFT",
        hcr::OP_MOD_SHIFT.into(),
        "HCR_OPMOD_SHIFT",
    );
    add("hcr::MAILBOX", hcr::MAILBOX as u64, "MLX4_MAILBOX_SIZE");
    let entries = page_list::MAX_ENTRIES as u64;
    add("page_list::MAX_ENTRIES", entries, "MLX4_MAILBOX_SIZE / 16");
    add("uar::SEND", uar::SEND, "MLX4_SEND_DOORBELL");
    add("uar::CQ_ARM", uar::CQ_ARM, "MLX4_CQ_DOORBELL");
    add(
        "query_fw::VER_MAJOR",
        f::VER_MAJOR as u64,
        "QUERY_FW_VER_OFFSET + 2",
    );
    add(
        "query_fw::MIN_CMD_IF_REV",
        f::MIN_CMD_IF_REV.into(),
        "MLX4_COMMAND_INTERFACE_MIN_REV",
    );
    add(
        "query_fw::MAX_CMD_IF_REV",
        f::MAX_CMD_IF_REV.into(),
        "MLX4_COMMAND_INTERFACE_MAX_REV",
    );
    add(
        "mod_stat_cfg::MODIFY",
        mod_stat_cfg::MODIFY as u64,
        "MOD_STAT_CFG_PG_SZ_M_OFFSET",
    );
    add(
        "mod_stat_cfg::PG_SZ",
        mod_stat_cfg::PG_SZ as u64,
        "MOD_STAT_CFG_PG_SZ_OFFSET",
    );
    add(
        "query_adapter::VSD",
        query_adapter::VSD as u64,
        "QUERY_ADAPTER_VSD_OFFSET",
    );
    let board = query_adapter::BOARD_ID as u64;
    add(
        "query_adapter::BOARD_ID",
        board,
        "QUERY_ADAPTER_VSD_OFFSET + VSD_OFFSET_MLX_BOARD_ID",
    );
    add(
        "init_hca::VERSION",
        init_hca::VERSION.into(),
        "INIT_HCA_VERSION",
    );
    add(
        "icm::CMPT_SHIFT",
        prm::icm::CMPT_SHIFT.into(),
        "MLX4_CMPT_SHIFT",
    );
    for (n, ours, c) in [
        ("icm::CMPT_QP", prm::icm::CMPT_QP, "MLX4_CMPT_TYPE_QP"),
        ("icm::CMPT_SRQ", prm::icm::CMPT_SRQ, "MLX4_CMPT_TYPE_SRQ"),
        ("icm::CMPT_CQ", prm::icm::CMPT_CQ, "MLX4_CMPT_TYPE_CQ"),
        ("icm::CMPT_EQ", prm::icm::CMPT_EQ, "MLX4_CMPT_TYPE_EQ"),
    ] {
        add(n, ours, c);
    }
}

/// Flag bits and codes inside fields: capability flags, memory keys,
/// events, CQEs, QP contexts, WQEs, steering and SET_PORT.
fn bits(v: &mut Vec<Check>) {
    use prm::{cq, eq, mcg, mpt, qp, set_port, wqe};
    let table: [(&str, u64, &str); 59] = [
        (
            "dev_cap::FLAG_VEP_UC_STEER",
            d::FLAG_VEP_UC_STEER,
            "MLX4_DEV_CAP_FLAG_VEP_UC_STEER",
        ),
        (
            "dev_cap::FLAG_VEP_MC_STEER",
            d::FLAG_VEP_MC_STEER,
            "MLX4_DEV_CAP_FLAG_VEP_MC_STEER",
        ),
        (
            "dev_cap::FLAG_64B_EQE",
            d::FLAG_64B_EQE,
            "MLX4_DEV_CAP_FLAG_64B_EQE",
        ),
        (
            "dev_cap::FLAG_64B_CQE",
            d::FLAG_64B_CQE,
            "MLX4_DEV_CAP_FLAG_64B_CQE",
        ),
        ("mpt::SW_OWNS", mpt::SW_OWNS.into(), "MLX4_MPT_FLAG_SW_OWNS"),
        ("mpt::MIO", mpt::MIO.into(), "MLX4_MPT_FLAG_MIO"),
        (
            "mpt::PHYSICAL",
            mpt::PHYSICAL.into(),
            "MLX4_MPT_FLAG_PHYSICAL",
        ),
        ("mpt::REGION", mpt::REGION.into(), "MLX4_MPT_FLAG_REGION"),
        (
            "mpt::LOCAL_READ",
            mpt::LOCAL_READ.into(),
            "MLX4_PERM_LOCAL_READ",
        ),
        (
            "mpt::LOCAL_WRITE",
            mpt::LOCAL_WRITE.into(),
            "MLX4_PERM_LOCAL_WRITE",
        ),
        (
            "mpt::PD_EN_INV",
            mpt::PD_EN_INV.into(),
            "MLX4_MPT_PD_FLAG_EN_INV",
        ),
        (
            "mpt::MTT_PRESENT",
            mpt::MTT_PRESENT,
            "MLX4_MTT_FLAG_PRESENT",
        ),
        (
            "eq::STATE_ARMED",
            eq::STATE_ARMED.into(),
            "MLX4_EQ_STATE_ARMED",
        ),
        (
            "eq::STATUS_WRITE_FAILURE",
            eq::STATUS_WRITE_FAILURE.into(),
            "MLX4_EQ_STATUS_WRITE_FAIL",
        ),
        (
            "eq::EV_COMPLETION",
            eq::EV_COMPLETION.into(),
            "MLX4_EVENT_TYPE_COMP",
        ),
        (
            "eq::EV_CQ_ERROR",
            eq::EV_CQ_ERROR.into(),
            "MLX4_EVENT_TYPE_CQ_ERROR",
        ),
        (
            "eq::EV_PORT_CHANGE",
            eq::EV_PORT_CHANGE.into(),
            "MLX4_EVENT_TYPE_PORT_CHANGE",
        ),
        ("eq::EV_CMD", eq::EV_CMD.into(), "MLX4_EVENT_TYPE_CMD"),
        (
            "eq::EV_OVERFLOW",
            eq::EV_OVERFLOW.into(),
            "MLX4_EVENT_TYPE_EQ_OVERFLOW",
        ),
        (
            "eq::PORT_DOWN",
            eq::PORT_DOWN.into(),
            "MLX4_PORT_CHANGE_SUBTYPE_DOWN",
        ),
        (
            "eq::PORT_ACTIVE",
            eq::PORT_ACTIVE.into(),
            "MLX4_PORT_CHANGE_SUBTYPE_ACTIVE",
        ),
        ("eq::ASYNC_MASK", eq::ASYNC_MASK, "MLX4_ASYNC_EVENT_MASK"),
        ("eq::EQE", eq::EQE as u64, "MLX4_EQ_ENTRY_SIZE"),
        ("cq::OWNER", cq::OWNER.into(), "MLX4_CQE_OWNER_MASK"),
        ("cq::IS_SEND", cq::IS_SEND.into(), "MLX4_CQE_IS_SEND_MASK"),
        (
            "cq::OPCODE_MASK",
            cq::OPCODE_MASK.into(),
            "MLX4_CQE_OPCODE_MASK",
        ),
        ("cq::OP_RECV", cq::OP_RECV.into(), "MLX4_RECV_OPCODE_SEND"),
        ("cq::OP_ERROR", cq::OP_ERROR.into(), "MLX4_CQE_OPCODE_ERROR"),
        (
            "cq::SYN_LOCAL_LENGTH",
            cq::SYN_LOCAL_LENGTH.into(),
            "MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR",
        ),
        (
            "cq::SYN_LOCAL_QP_OP",
            cq::SYN_LOCAL_QP_OP.into(),
            "MLX4_CQE_SYNDROME_LOCAL_QP_OP_ERR",
        ),
        (
            "cq::SYN_LOCAL_PROT",
            cq::SYN_LOCAL_PROT.into(),
            "MLX4_CQE_SYNDROME_LOCAL_PROT_ERR",
        ),
        (
            "cq::SYN_FLUSHED",
            cq::SYN_FLUSHED.into(),
            "MLX4_CQE_SYNDROME_WR_FLUSH_ERR",
        ),
        ("cq::ST_IPV4", cq::ST_IPV4.into(), "MLX4_CQE_STATUS_IPV4"),
        ("cq::ST_IPV4F", cq::ST_IPV4F.into(), "MLX4_CQE_STATUS_IPV4F"),
        ("cq::ST_IPV6", cq::ST_IPV6.into(), "MLX4_CQE_STATUS_IPV6"),
        ("cq::ST_TCP", cq::ST_TCP.into(), "MLX4_CQE_STATUS_TCP"),
        ("cq::ST_UDP", cq::ST_UDP.into(), "MLX4_CQE_STATUS_UDP"),
        ("cq::ST_IPOK", cq::ST_IPOK.into(), "MLX4_CQE_STATUS_IPOK"),
        (
            "cq::DB_REQ_NOT",
            cq::DB_REQ_NOT.into(),
            "MLX4_CQ_DB_REQ_NOT",
        ),
        (
            "cq::DB_REQ_NOT_SOL",
            cq::DB_REQ_NOT_SOL.into(),
            "MLX4_CQ_DB_REQ_NOT_SOL",
        ),
        ("qp::ST_MLX", qp::ST_MLX.into(), "MLX4_QP_ST_MLX << 16"),
        ("qp::PARAMS2_FPP", qp::PARAMS2_FPP.into(), "MLX4_QP_BIT_FPP"),
        (
            "qp::PARAM3_NO_VLAN_STRIP",
            qp::PARAM3_NO_VLAN_STRIP.into(),
            "MLX4_STRIP_VLAN",
        ),
        (
            "qp::FLAG_RSS",
            qp::FLAG_RSS.into(),
            "1 << MLX4_RSS_QPC_FLAG_OFFSET",
        ),
        ("qp::RSS_KEY", qp::RSS_KEY as u64, "MLX4_EN_RSS_KEY_SIZE"),
        ("qp::TXBB", qp::TXBB as u64, "TXBB_SIZE"),
        ("wqe::OWNER", wqe::OWNER.into(), "MLX4_EN_BIT_DESC_OWN"),
        ("wqe::OP_NOP", wqe::OP_NOP.into(), "MLX4_OPCODE_NOP"),
        ("wqe::OP_SEND", wqe::OP_SEND.into(), "MLX4_OPCODE_SEND"),
        (
            "wqe::SRCRB_CQ_UPDATE",
            wqe::SRCRB_CQ_UPDATE.into(),
            "MLX4_WQE_CTRL_CQ_UPDATE",
        ),
        (
            "wqe::SRCRB_SOLICITED",
            wqe::SRCRB_SOLICITED.into(),
            "MLX4_WQE_CTRL_SOLICITED",
        ),
        (
            "wqe::SRCRB_IP_CSUM",
            wqe::SRCRB_IP_CSUM.into(),
            "MLX4_WQE_CTRL_IP_CSUM",
        ),
        (
            "wqe::SRCRB_L4_CSUM",
            wqe::SRCRB_L4_CSUM.into(),
            "MLX4_WQE_CTRL_TCP_UDP_CSUM",
        ),
        ("wqe::INLINE", wqe::INLINE.into(), "MLX4_INLINE_SEG"),
        ("wqe::STAMP", wqe::STAMP.into(), "STAMP_VAL"),
        ("mcg::PROT_ETH", mcg::PROT_ETH.into(), "MLX4_PROT_ETH << 30"),
        (
            "mcg::BLOCK_LOOPBACK",
            mcg::BLOCK_LOOPBACK.into(),
            "1 << MGM_BLCK_LB_BIT",
        ),
        (
            "set_port::FLAGS_MTU_PAUSE",
            set_port::FLAGS_MTU_PAUSE.into(),
            "SET_PORT_GEN_ALL_VALID",
        ),
        ("set_port::MAC_VALID", set_port::MAC_VALID, "MLX4_MAC_VALID"),
    ];
    v.extend(table.into_iter().map(|(n, ours, c)| Check::new(n, ours, c)));
    let codes: [(&str, u64, &str); 17] = [
        ("qp::RST", qp::RST.into(), "MLX4_QP_STATE_RST"),
        ("qp::INIT", qp::INIT.into(), "MLX4_QP_STATE_INIT"),
        ("qp::RTR", qp::RTR.into(), "MLX4_QP_STATE_RTR"),
        ("qp::RTS", qp::RTS.into(), "MLX4_QP_STATE_RTS"),
        ("qp::ERR", qp::ERR.into(), "MLX4_QP_STATE_ERR"),
        (
            "qp::RSS_HASH_XOR",
            qp::RSS_HASH_XOR.into(),
            "MLX4_RSS_HASH_XOR",
        ),
        (
            "qp::RSS_HASH_TOP",
            qp::RSS_HASH_TOP.into(),
            "MLX4_RSS_HASH_TOP",
        ),
        ("mcg::STEER_UC", mcg::STEER_UC.into(), "MLX4_UC_STEER"),
        ("mcg::STEER_MC", mcg::STEER_MC.into(), "MLX4_MC_STEER"),
        (
            "mcg::FLTR_CONFIG",
            mcg::FLTR_CONFIG.into(),
            "MLX4_MCAST_CONFIG",
        ),
        (
            "mcg::FLTR_DISABLE",
            mcg::FLTR_DISABLE.into(),
            "MLX4_MCAST_DISABLE",
        ),
        (
            "mcg::FLTR_ENABLE",
            mcg::FLTR_ENABLE.into(),
            "MLX4_MCAST_ENABLE",
        ),
        (
            "set_port::OP_MOD_ETH",
            set_port::OP_MOD_ETH.into(),
            "MLX4_SET_PORT_ETH_OPCODE",
        ),
        ("query_port::TYPE_IB", p::TYPE_IB, "MLX4_PORT_TYPE_IB"),
        ("query_port::TYPE_ETH", p::TYPE_ETH, "MLX4_PORT_TYPE_ETH"),
        (
            "set_port::GENERAL",
            set_port::GENERAL.into(),
            "MLX4_SET_PORT_GENERAL",
        ),
        (
            "set_port::RQP_CALC",
            set_port::RQP_CALC.into(),
            "MLX4_SET_PORT_RQP_CALC",
        ),
    ];
    v.extend(codes.into_iter().map(|(n, ours, c)| Check::new(n, ours, c)));
    for (n, ours, c) in [
        (
            "set_port::MAC_TABLE",
            set_port::MAC_TABLE.into(),
            "MLX4_SET_PORT_MAC_TABLE",
        ),
        (
            "set_port::MAC_ENTRIES",
            set_port::MAC_ENTRIES as u64,
            "MLX4_MAX_MAC_NUM",
        ),
        (
            "set_port::FLAGS2_USER_MTU",
            set_port::FLAGS2_USER_MTU.into(),
            "MLX4_FLAG2_V_USER_MTU_MASK",
        ),
        (
            "qp::RSS_UDP_IPV6",
            qp::RSS_UDP_IPV6.into(),
            "MLX4_RSS_UDP_IPV6",
        ),
        (
            "qp::RSS_UDP_IPV4",
            qp::RSS_UDP_IPV4.into(),
            "MLX4_RSS_UDP_IPV4",
        ),
        (
            "qp::RSS_TCP_IPV6",
            qp::RSS_TCP_IPV6.into(),
            "MLX4_RSS_TCP_IPV6",
        ),
        ("qp::RSS_IPV6", qp::RSS_IPV6.into(), "MLX4_RSS_IPV6"),
        (
            "qp::RSS_TCP_IPV4",
            qp::RSS_TCP_IPV4.into(),
            "MLX4_RSS_TCP_IPV4",
        ),
        ("qp::RSS_IPV4", qp::RSS_IPV4.into(), "MLX4_RSS_IPV4"),
    ] {
        v.push(Check::new(n, ours, c));
    }
}

#[test]
fn definitions_match_linux() {
    let test = "mlx4 definitions_match_linux";
    let patterns = [
        "include/linux/mlx4/*.h",
        "drivers/net/ethernet/mellanox/mlx4/*",
    ];
    let Some(linux) = LinuxSource::extract(test, &patterns) else {
        return;
    };
    let mut checks = Vec::new();
    layouts(&mut checks);
    mailboxes(&mut checks);
    opcodes(&mut checks);
    statuses(&mut checks);
    registers(&mut checks);
    bits(&mut checks);
    eth_stats(&mut checks);
    let texts: Vec<String> = FILES.iter().map(|f| linux.read(f)).collect();
    let defs = Definitions::parse(texts.iter().map(String::as_str));
    let exprs: Vec<String> = checks.iter().map(|c| c.linux.clone()).collect();
    let program = format!("{KERNEL_STUBS}{}", defs.reaching(&exprs));
    linux.assert_agree(None, &program, &checks);
}
