//! The driver's transcribed registers, bits and descriptor layouts held
//! against Linux's own definitions (`drivers/net/ethernet/intel/igb/
//! e1000_regs.h`, `e1000_defines.h`, `e1000_82575.h`), extracted at test
//! time from Debian's `linux-source` package and compiled into a small C
//! program that prints each value: a mismatch fails and names the
//! definition. No kernel source is committed. Without the package the
//! test says so and passes, except under `CI=true`, where it fails.
use rpmd_igb::desc::{RxWb, TxData, TxWb};
use rpmd_igb::family::Family;
use rpmd_igb::regs::*;
use rpmd_pmd::testing::linux_source::{Check, Definitions, LinuxSource, KERNEL_STUBS};

/// Register offsets, per-queue ones for every queue.
fn registers(v: &mut Vec<Check>) {
    let mut add = |name: &str, ours: u64, c: &str| v.push(Check::new(name, ours, c));
    for (n, off, c) in [
        ("CTRL", CTRL, "E1000_CTRL"),
        ("CTRL_EXT", CTRL_EXT, "E1000_CTRL_EXT"),
        ("STATUS", STATUS, "E1000_STATUS"),
        ("EECD", EECD, "E1000_EECD"),
        ("EERD", EERD, "E1000_EERD"),
        ("MDIC", MDIC, "E1000_MDIC"),
        ("ICR", ICR, "E1000_ICR"),
        ("IMC", IMC, "E1000_IMC"),
        ("EIMC", EIMC, "E1000_EIMC"),
        ("RCTL", RCTL, "E1000_RCTL"),
        ("TCTL", TCTL, "E1000_TCTL"),
        ("TIPG", TIPG, "E1000_TIPG"),
        ("VET", VET, "E1000_VET"),
        ("RLPML", RLPML, "E1000_RLPML"),
        ("RXCSUM", RXCSUM, "E1000_RXCSUM"),
        ("MTA", MTA, "E1000_MTA"),
        ("VFTA", VFTA, "E1000_VFTA"),
        ("RAL0", RAL0, "E1000_RAL(0)"),
        ("RAH0", RAH0, "E1000_RAH(0)"),
        ("RAL16", RAL16, "E1000_RAL(16)"),
        ("RAH0 + 8 * 15", RAH0 + 8 * 15, "E1000_RAH(15)"),
        ("MRQC", MRQC, "E1000_MRQC"),
        ("IMS", IMS, "E1000_IMS"),
        ("GPIE", GPIE, "E1000_GPIE"),
        ("EICR", EICR, "E1000_EICR"),
        ("EIMS", EIMS, "E1000_EIMS"),
        ("EIAC", EIAC, "E1000_EIAC"),
        ("EIAM", EIAM, "E1000_EIAM"),
        ("IVAR0", IVAR0, "E1000_IVAR0"),
        ("IVAR_MISC", IVAR_MISC, "E1000_IVAR_MISC"),
        ("eitr(3)", eitr(3), "E1000_EITR(3)"),
        ("RETA", RETA, "E1000_RETA(0)"),
        ("RSSRK", RSSRK, "E1000_RSSRK(0)"),
        ("MPC", MPC, "E1000_MPC"),
        ("CRCERRS", CRCERRS, "E1000_CRCERRS"),
        ("RNBC", RNBC, "E1000_RNBC"),
        ("GPRC", GPRC, "E1000_GPRC"),
        ("BPRC", BPRC, "E1000_BPRC"),
        ("MPRC", MPRC, "E1000_MPRC"),
        ("GPTC", GPTC, "E1000_GPTC"),
        ("GORCL", GORCL, "E1000_GORCL"),
        ("GOTCL", GOTCL, "E1000_GOTCL"),
        ("RLEC", RLEC, "E1000_RLEC"),
        ("RXERRC", RXERRC, "E1000_RXERRC"),
        ("RUC", RUC, "E1000_RUC"),
        ("ROC", ROC, "E1000_ROC"),
        ("TPR", TPR, "E1000_TPR"),
        ("TPT", TPT, "E1000_TPT"),
        ("MPTC", MPTC, "E1000_MPTC"),
        ("BPTC", BPTC, "E1000_BPTC"),
    ] {
        add(n, off, c);
    }
    for q in 0..MAX_QUEUES {
        for (n, ours, c) in [
            ("rdbal", rdbal(q), "E1000_RDBAL"),
            ("rdbah", rdbah(q), "E1000_RDBAH"),
            ("rdlen", rdlen(q), "E1000_RDLEN"),
            ("srrctl", srrctl(q), "E1000_SRRCTL"),
            ("rdh", rdh(q), "E1000_RDH"),
            ("rdt", rdt(q), "E1000_RDT"),
            ("rxdctl", rxdctl(q), "E1000_RXDCTL"),
            ("tdbal", tdbal(q), "E1000_TDBAL"),
            ("tdbah", tdbah(q), "E1000_TDBAH"),
            ("tdlen", tdlen(q), "E1000_TDLEN"),
            ("tdh", tdh(q), "E1000_TDH"),
            ("tdt", tdt(q), "E1000_TDT"),
            ("txdctl", txdctl(q), "E1000_TXDCTL"),
        ] {
            add(&format!("{n}({q})"), ours, &format!("{c}({q})"));
        }
    }
}

/// Bits and shifts inside registers and descriptors.
fn bits(v: &mut Vec<Check>) {
    let bits: [(&str, u32, &str); 80] = [
        ("ICR_LSC", ICR_LSC, "E1000_ICR_LSC"),
        ("GPIE_NSICR", GPIE_NSICR, "E1000_GPIE_NSICR"),
        ("GPIE_MSIX_MODE", GPIE_MSIX_MODE, "E1000_GPIE_MSIX_MODE"),
        ("GPIE_EIAME", GPIE_EIAME, "E1000_GPIE_EIAME"),
        ("GPIE_PBA", GPIE_PBA, "E1000_GPIE_PBA"),
        ("IVAR_VALID", IVAR_VALID, "E1000_IVAR_VALID"),
        ("NVM_SUM", NVM_SUM as u32, "NVM_SUM"),
        (
            "NVM_CHECKSUM_WORD",
            NVM_CHECKSUM_WORD as u32,
            "NVM_CHECKSUM_REG",
        ),
        (
            "MRQC_ENABLE_RSS_MQ",
            MRQC_ENABLE_RSS_MQ,
            "E1000_MRQC_ENABLE_RSS_MQ",
        ),
        (
            "MRQC_RSS_FIELD_IPV4_TCP",
            MRQC_RSS_FIELD_IPV4_TCP,
            "E1000_MRQC_RSS_FIELD_IPV4_TCP",
        ),
        (
            "MRQC_RSS_FIELD_IPV4",
            MRQC_RSS_FIELD_IPV4,
            "E1000_MRQC_RSS_FIELD_IPV4",
        ),
        (
            "MRQC_RSS_FIELD_IPV6",
            MRQC_RSS_FIELD_IPV6,
            "E1000_MRQC_RSS_FIELD_IPV6",
        ),
        (
            "MRQC_RSS_FIELD_IPV6_TCP",
            MRQC_RSS_FIELD_IPV6_TCP,
            "E1000_MRQC_RSS_FIELD_IPV6_TCP",
        ),
        (
            "MRQC_RSS_FIELD_IPV4_UDP",
            MRQC_RSS_FIELD_IPV4_UDP,
            "E1000_MRQC_RSS_FIELD_IPV4_UDP",
        ),
        (
            "MRQC_RSS_FIELD_IPV6_UDP",
            MRQC_RSS_FIELD_IPV6_UDP,
            "E1000_MRQC_RSS_FIELD_IPV6_UDP",
        ),
        ("CTRL_FD", CTRL_FD, "E1000_CTRL_FD"),
        ("CTRL_SLU", CTRL_SLU, "E1000_CTRL_SLU"),
        ("CTRL_RST", CTRL_RST, "E1000_CTRL_RST"),
        ("CTRL_VME", CTRL_VME, "E1000_CTRL_VME"),
        ("STATUS_FD", STATUS_FD, "E1000_STATUS_FD"),
        ("STATUS_LU", STATUS_LU, "E1000_STATUS_LU"),
        ("EECD_AUTO_RD", EECD_AUTO_RD, "E1000_EECD_AUTO_RD"),
        ("EERD_START", EERD_START, "E1000_NVM_RW_REG_START"),
        ("EERD_DONE", EERD_DONE, "E1000_NVM_RW_REG_DONE"),
        (
            "EERD_ADDR_SHIFT",
            EERD_ADDR_SHIFT,
            "E1000_NVM_RW_ADDR_SHIFT",
        ),
        ("EERD_DATA_SHIFT", EERD_DATA_SHIFT, "E1000_NVM_RW_REG_DATA"),
        ("MDIC_REG_SHIFT", MDIC_REG_SHIFT, "E1000_MDIC_REG_SHIFT"),
        ("MDIC_PHY_SHIFT", MDIC_PHY_SHIFT, "E1000_MDIC_PHY_SHIFT"),
        ("MDIC_OP_READ", MDIC_OP_READ, "E1000_MDIC_OP_READ"),
        ("MDIC_OP_WRITE", MDIC_OP_WRITE, "E1000_MDIC_OP_WRITE"),
        ("MDIC_READY", MDIC_READY, "E1000_MDIC_READY"),
        ("MDIC_ERROR", MDIC_ERROR, "E1000_MDIC_ERROR"),
        ("RAH_AV", RAH_AV, "E1000_RAH_AV"),
        ("RCTL_EN", RCTL_EN, "E1000_RCTL_EN"),
        ("RCTL_SBP", RCTL_SBP, "E1000_RCTL_SBP"),
        ("RCTL_UPE", RCTL_UPE, "E1000_RCTL_UPE"),
        ("RCTL_MPE", RCTL_MPE, "E1000_RCTL_MPE"),
        ("RCTL_LPE", RCTL_LPE, "E1000_RCTL_LPE"),
        ("RCTL_LBM_MAC", RCTL_LBM_MAC, "E1000_RCTL_LBM_MAC"),
        ("RCTL_MO_SHIFT", RCTL_MO_SHIFT, "E1000_RCTL_MO_SHIFT"),
        ("RCTL_BAM", RCTL_BAM, "E1000_RCTL_BAM"),
        ("RCTL_VFE", RCTL_VFE, "E1000_RCTL_VFE"),
        ("RCTL_SECRC", RCTL_SECRC, "E1000_RCTL_SECRC"),
        ("TCTL_EN", TCTL_EN, "E1000_TCTL_EN"),
        ("TCTL_PSP", TCTL_PSP, "E1000_TCTL_PSP"),
        (
            "TCTL_CT",
            TCTL_CT,
            "E1000_COLLISION_THRESHOLD << E1000_CT_SHIFT",
        ),
        (
            "TCTL_COLD",
            TCTL_COLD,
            "E1000_COLLISION_DISTANCE << E1000_COLD_SHIFT",
        ),
        ("RXCSUM_IPOFLD", RXCSUM_IPOFLD, "E1000_RXCSUM_IPOFL"),
        ("RXCSUM_TUOFLD", RXCSUM_TUOFLD, "E1000_RXCSUM_TUOFL"),
        ("RXCSUM_PCSD", RXCSUM_PCSD, "E1000_RXCSUM_PCSD"),
        (
            "SRRCTL_BSIZEPKT_SHIFT",
            SRRCTL_BSIZEPKT_SHIFT,
            "E1000_SRRCTL_BSIZEPKT_SHIFT",
        ),
        (
            "SRRCTL_DESCTYPE_ADV_ONEBUF",
            SRRCTL_DESCTYPE_ADV_ONEBUF,
            "E1000_SRRCTL_DESCTYPE_ADV_ONEBUF",
        ),
        ("SRRCTL_DROP_EN", SRRCTL_DROP_EN, "E1000_SRRCTL_DROP_EN"),
        ("DCTL_ENABLE (rx)", DCTL_ENABLE, "E1000_RXDCTL_QUEUE_ENABLE"),
        ("DCTL_ENABLE (tx)", DCTL_ENABLE, "E1000_TXDCTL_QUEUE_ENABLE"),
        ("RXD_STAT_DD", RXD_STAT_DD, "E1000_RXD_STAT_DD"),
        ("RXD_STAT_EOP", RXD_STAT_EOP, "E1000_RXD_STAT_EOP"),
        ("RXD_STAT_VP", RXD_STAT_VP, "E1000_RXD_STAT_VP"),
        ("RXD_STAT_UDPCS", RXD_STAT_UDPCS, "E1000_RXD_STAT_UDPCS"),
        ("RXD_STAT_L4CS", RXD_STAT_L4CS, "E1000_RXD_STAT_TCPCS"),
        (
            "RXDEXT_STATERR_TCPE",
            RXDEXT_STATERR_TCPE,
            "E1000_RXDEXT_STATERR_TCPE",
        ),
        (
            "RXDEXT_STATERR_IPE",
            RXDEXT_STATERR_IPE,
            "E1000_RXDEXT_STATERR_IPE",
        ),
        (
            "RXDEXT_ERR_FRAME",
            RXDEXT_ERR_FRAME,
            "E1000_RXDEXT_ERR_FRAME_ERR_MASK",
        ),
        (
            "ADVTXD_DTYP_DATA",
            ADVTXD_DTYP_DATA,
            "E1000_ADVTXD_DTYP_DATA",
        ),
        (
            "ADVTXD_DTYP_CTXT",
            ADVTXD_DTYP_CTXT,
            "E1000_ADVTXD_DTYP_CTXT",
        ),
        ("ADVTXD_DCMD_EOP", ADVTXD_DCMD_EOP, "E1000_ADVTXD_DCMD_EOP"),
        (
            "ADVTXD_DCMD_IFCS",
            ADVTXD_DCMD_IFCS,
            "E1000_ADVTXD_DCMD_IFCS",
        ),
        ("ADVTXD_DCMD_RS", ADVTXD_DCMD_RS, "E1000_ADVTXD_DCMD_RS"),
        (
            "ADVTXD_DCMD_DEXT",
            ADVTXD_DCMD_DEXT,
            "E1000_ADVTXD_DCMD_DEXT",
        ),
        ("ADVTXD_DCMD_VLE", ADVTXD_DCMD_VLE, "E1000_ADVTXD_DCMD_VLE"),
        ("ADVTXD_DCMD_TSE", ADVTXD_DCMD_TSE, "E1000_ADVTXD_DCMD_TSE"),
        (
            "ADVTXD_PAYLEN_SHIFT",
            ADVTXD_PAYLEN_SHIFT,
            "E1000_ADVTXD_PAYLEN_SHIFT",
        ),
        (
            "ADVTXD_POPTS_IXSM",
            ADVTXD_POPTS_IXSM,
            "E1000_TXD_POPTS_IXSM << 8",
        ),
        (
            "ADVTXD_POPTS_TXSM",
            ADVTXD_POPTS_TXSM,
            "E1000_TXD_POPTS_TXSM << 8",
        ),
        ("TXD_STAT_DD", TXD_STAT_DD, "E1000_TXD_STAT_DD"),
        (
            "ADVTXD_MACLEN_SHIFT",
            ADVTXD_MACLEN_SHIFT,
            "E1000_ADVTXD_MACLEN_SHIFT",
        ),
        (
            "ADVTXD_TUCMD_IPV4",
            ADVTXD_TUCMD_IPV4,
            "E1000_ADVTXD_TUCMD_IPV4",
        ),
        (
            "ADVTXD_TUCMD_L4T_TCP",
            ADVTXD_TUCMD_L4T_TCP,
            "E1000_ADVTXD_TUCMD_L4T_TCP",
        ),
        (
            "ADVTXD_L4LEN_SHIFT",
            ADVTXD_L4LEN_SHIFT,
            "E1000_ADVTXD_L4LEN_SHIFT",
        ),
        (
            "ADVTXD_MSS_SHIFT",
            ADVTXD_MSS_SHIFT,
            "E1000_ADVTXD_MSS_SHIFT",
        ),
    ];
    for (n, ours, c) in bits {
        v.push(Check::new(n, ours as u64, c));
    }
}

/// Descriptor sizes and field offsets.
fn layouts(v: &mut Vec<Check>) {
    let rx = "union e1000_adv_rx_desc";
    let tx = "union e1000_adv_tx_desc";
    let layout: [(&str, usize, String); 8] = [
        (
            "descriptor size",
            size_of::<RxWb>(),
            format!("sizeof({rx})"),
        ),
        (
            "RxWb::status_error",
            std::mem::offset_of!(RxWb, status_error),
            format!("offsetof({rx}, wb.upper.status_error)"),
        ),
        (
            "RxWb::length",
            std::mem::offset_of!(RxWb, length),
            format!("offsetof({rx}, wb.upper.length)"),
        ),
        (
            "RxWb::vlan",
            std::mem::offset_of!(RxWb, vlan),
            format!("offsetof({rx}, wb.upper.vlan)"),
        ),
        (
            "RxWb::rss",
            std::mem::offset_of!(RxWb, rss),
            format!("offsetof({rx}, wb.lower.hi_dword.rss)"),
        ),
        (
            "TxData::cmd_type_len",
            std::mem::offset_of!(TxData, cmd_type_len),
            format!("offsetof({tx}, read.cmd_type_len)"),
        ),
        (
            "TxData::olinfo_status",
            std::mem::offset_of!(TxData, olinfo_status),
            format!("offsetof({tx}, read.olinfo_status)"),
        ),
        (
            "TxWb::status",
            std::mem::offset_of!(TxWb, status),
            format!("offsetof({tx}, wb.status)"),
        ),
    ];
    for (n, ours, c) in layout {
        v.push(Check::new(n, ours as u64, c));
    }
}

/// The headers' prelude: the kernel types they use, then the headers.
const PRELUDE: &str = "#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n\
    typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;\n\
    typedef int32_t s32; typedef uint16_t __le16; typedef uint32_t __le32;\n\
    typedef uint64_t __le64; typedef _Bool bool;\n\
    #include \"e1000_defines.h\"\n#include \"e1000_regs.h\"\n#include \"e1000_82575.h\"\n";

/// Bits added with the 82580 and I350 (checked as the other bits are).
fn family_bits(v: &mut Vec<Check>) {
    for (n, ours, c) in [
        (
            "CTRL_EXT_LINK_MODE_MASK",
            CTRL_EXT_LINK_MODE_MASK,
            "E1000_CTRL_EXT_LINK_MODE_MASK",
        ),
        (
            "STATUS_FUNC_MASK",
            STATUS_FUNC_MASK,
            "E1000_STATUS_FUNC_MASK",
        ),
        (
            "STATUS_FUNC_SHIFT",
            STATUS_FUNC_SHIFT,
            "E1000_STATUS_FUNC_SHIFT",
        ),
        (
            "NVM_COMPATIBILITY_REG_3",
            NVM_COMPATIBILITY_REG_3 as u32,
            "NVM_COMPATIBILITY_REG_3",
        ),
        (
            "NVM_COMPATIBILITY_BIT_MASK",
            NVM_COMPATIBILITY_BIT_MASK as u32,
            "NVM_COMPATIBILITY_BIT_MASK",
        ),
        ("NVM_ETRACK_WORD", NVM_ETRACK_WORD as u32, "NVM_ETRACK_WORD"),
        (
            "NVM_ETRACK_VALID",
            NVM_ETRACK_VALID as u32,
            "NVM_ETRACK_VALID",
        ),
        ("NVM_VERSION", NVM_VERSION as u32, "NVM_VERSION"),
    ] {
        v.push(Check::new(n, ours as u64, c));
    }
    for a in 0..4u8 {
        v.push(Check::new(
            format!("nvm_lan_func_offset({a})"),
            nvm_lan_func_offset(a) as u64,
            format!("NVM_82580_LAN_FUNC_OFFSET({a})"),
        ));
    }
}

/// Every device ID each member claims, by Linux's name for it (from
/// `e1000_hw.h`, which needs the kernel to compile whole: its `#define`s
/// are cut out).
fn device_ids() -> Vec<Check> {
    let names: [(Family, &[&str]); 5] = [
        (
            Family::I82576,
            &[
                "82576",
                "82576_FIBER",
                "82576_SERDES",
                "82576_QUAD_COPPER",
                "82576_QUAD_COPPER_ET2",
                "82576_NS",
                "82576_NS_SERDES",
                "82576_SERDES_QUAD",
            ],
        ),
        (
            Family::I82580,
            &[
                "82580_COPPER",
                "82580_FIBER",
                "82580_SERDES",
                "82580_SGMII",
                "82580_COPPER_DUAL",
                "82580_QUAD_FIBER",
            ],
        ),
        (
            Family::I350,
            &["I350_COPPER", "I350_FIBER", "I350_SERDES", "I350_SGMII"],
        ),
        (
            Family::I210,
            &[
                "I210_COPPER",
                "I210_FIBER",
                "I210_SERDES",
                "I210_SGMII",
                "I210_COPPER_FLASHLESS",
                "I210_SERDES_FLASHLESS",
            ],
        ),
        (Family::I211, &["I211_COPPER"]),
    ];
    let mut v = Vec::new();
    for (family, linux) in names {
        assert_eq!(family.device_ids().len(), linux.len(), "{family:?}");
        for (id, n) in family.device_ids().iter().zip(linux) {
            v.push(Check::new(
                format!("{} {id:04x}", family.name()),
                *id as u64,
                format!("E1000_DEV_ID_{n}"),
            ));
        }
    }
    v
}

#[test]
fn device_ids_match_linux() {
    let test = "igb device_ids_match_linux";
    let hw = "drivers/net/ethernet/intel/igb/e1000_hw.h";
    let Some(linux) = LinuxSource::extract(test, &[hw]) else {
        return;
    };
    let checks = device_ids();
    let defs = Definitions::parse([linux.read(hw).as_str()]);
    let exprs: Vec<String> = checks.iter().map(|c| c.linux.clone()).collect();
    let program = format!("{KERNEL_STUBS}{}", defs.reaching(&exprs));
    linux.assert_agree(None, &program, &checks);
}

#[test]
fn registers_bits_and_layouts_match_linux() {
    let test = "igb registers_bits_and_layouts_match_linux";
    let igb = "drivers/net/ethernet/intel/igb";
    let Some(linux) = LinuxSource::extract(test, &[&format!("{igb}/e1000_*.h")]) else {
        return;
    };
    let mut checks = Vec::new();
    registers(&mut checks);
    bits(&mut checks);
    family_bits(&mut checks);
    layouts(&mut checks);
    linux.assert_agree(Some(&linux.path(igb)), PRELUDE, &checks);
}

/// The VF's registers, mailbox bits and messages, and its device IDs,
/// against Linux's igbvf (the other VF driver that speaks the protocol)
/// and igb's side of it (`e1000_mbx.h`: the promiscuous message).
fn vf_checks() -> Vec<Check> {
    let mut v = Vec::new();
    let mut add = |name: &str, ours: u64, c: &str| v.push(Check::new(name, ours, c));
    for (n, ours, c) in [
        ("V2PMAILBOX", V2PMAILBOX, "E1000_V2PMAILBOX(0)"),
        ("VMBMEM", VMBMEM, "E1000_VMBMEM(0)"),
        ("VMBMEM_WORDS", VMBMEM_WORDS as u64, "E1000_VFMAILBOX_SIZE"),
        ("VFGPRC", VFGPRC, "E1000_VFGPRC"),
        ("VFGPTC", VFGPTC, "E1000_VFGPTC"),
        ("VFGORC", VFGORC, "E1000_VFGORC"),
        ("VFGOTC", VFGOTC, "E1000_VFGOTC"),
        ("VFMPRC", VFMPRC, "E1000_VFMPRC"),
        (
            "DEVICE_IDS_VF[0]",
            DEVICE_IDS_VF[0] as u64,
            "E1000_DEV_ID_82576_VF",
        ),
        (
            "DEVICE_IDS_VF[1]",
            DEVICE_IDS_VF[1] as u64,
            "E1000_DEV_ID_I350_VF",
        ),
    ] {
        add(n, ours, c);
    }
    for q in 0..VF_QUEUES {
        for (n, ours, c) in [
            ("rdbal", rdbal(q), "E1000_RDBAL"),
            ("rdt", rdt(q), "E1000_RDT"),
            ("srrctl", srrctl(q), "E1000_SRRCTL"),
            ("rxdctl", rxdctl(q), "E1000_RXDCTL"),
            ("tdbal", tdbal(q), "E1000_TDBAL"),
            ("tdt", tdt(q), "E1000_TDT"),
            ("txdctl", txdctl(q), "E1000_TXDCTL"),
        ] {
            add(&format!("VF {n}({q})"), ours, &format!("{c}({q})"));
        }
    }
    let bits: [(&str, u32, &str); 19] = [
        ("V2PMAILBOX_REQ", V2PMAILBOX_REQ, "E1000_V2PMAILBOX_REQ"),
        ("V2PMAILBOX_ACK", V2PMAILBOX_ACK, "E1000_V2PMAILBOX_ACK"),
        ("V2PMAILBOX_VFU", V2PMAILBOX_VFU, "E1000_V2PMAILBOX_VFU"),
        ("V2PMAILBOX_PFU", V2PMAILBOX_PFU, "E1000_V2PMAILBOX_PFU"),
        (
            "V2PMAILBOX_PFSTS",
            V2PMAILBOX_PFSTS,
            "E1000_V2PMAILBOX_PFSTS",
        ),
        (
            "V2PMAILBOX_PFACK",
            V2PMAILBOX_PFACK,
            "E1000_V2PMAILBOX_PFACK",
        ),
        ("V2PMAILBOX_RSTI", V2PMAILBOX_RSTI, "E1000_V2PMAILBOX_RSTI"),
        ("V2PMAILBOX_RSTD", V2PMAILBOX_RSTD, "E1000_V2PMAILBOX_RSTD"),
        ("VT_MSGTYPE_ACK", VT_MSGTYPE_ACK, "E1000_VT_MSGTYPE_ACK"),
        ("VT_MSGTYPE_NACK", VT_MSGTYPE_NACK, "E1000_VT_MSGTYPE_NACK"),
        ("VT_MSGTYPE_CTS", VT_MSGTYPE_CTS, "E1000_VT_MSGTYPE_CTS"),
        (
            "VT_MSGINFO_SHIFT",
            VT_MSGINFO_SHIFT,
            "E1000_VT_MSGINFO_SHIFT",
        ),
        ("VF_RESET", VF_RESET, "E1000_VF_RESET"),
        ("VF_SET_MAC_ADDR", VF_SET_MAC_ADDR, "E1000_VF_SET_MAC_ADDR"),
        (
            "VF_MAC_FILTER_CLR",
            VF_MAC_FILTER_CLR,
            "E1000_VF_MAC_FILTER_CLR",
        ),
        (
            "VF_MAC_FILTER_ADD",
            VF_MAC_FILTER_ADD,
            "E1000_VF_MAC_FILTER_ADD",
        ),
        (
            "VF_SET_MULTICAST",
            VF_SET_MULTICAST,
            "E1000_VF_SET_MULTICAST",
        ),
        ("VF_SET_VLAN", VF_SET_VLAN, "E1000_VF_SET_VLAN"),
        ("VF_SET_LPE", VF_SET_LPE, "E1000_VF_SET_LPE"),
    ];
    for (n, ours, c) in bits {
        add(n, ours as u64, c);
    }
    add(
        "PF_CONTROL_MSG",
        PF_CONTROL_MSG as u64,
        "E1000_PF_CONTROL_MSG",
    );
    v
}

#[test]
fn vf_registers_and_mailbox_match_linux() {
    let test = "igb vf_registers_and_mailbox_match_linux";
    let vf = "drivers/net/ethernet/intel/igbvf";
    let pf_mbx = "drivers/net/ethernet/intel/igb/e1000_mbx.h";
    let files = [
        format!("{vf}/mbx.h"),
        format!("{vf}/regs.h"),
        format!("{vf}/vf.h"),
        pf_mbx.to_string(),
    ];
    let patterns: Vec<&str> = files.iter().map(String::as_str).collect();
    let Some(linux) = LinuxSource::extract(test, &patterns) else {
        return;
    };
    let mut checks = vf_checks();
    // Only igb's side defines the promiscuous message.
    checks.push(Check::new(
        "VF_SET_PROMISC",
        VF_SET_PROMISC as u64,
        "E1000_VF_SET_PROMISC",
    ));
    checks.push(Check::new(
        "VF_SET_PROMISC_MULTICAST",
        VF_SET_PROMISC_MULTICAST as u64,
        "E1000_VF_SET_PROMISC_MULTICAST",
    ));
    let texts: Vec<String> = files.iter().map(|f| linux.read(f)).collect();
    let defs = Definitions::parse(texts.iter().map(String::as_str));
    let exprs: Vec<String> = checks.iter().map(|c| c.linux.clone()).collect();
    let program = format!("{KERNEL_STUBS}{}", defs.reaching(&exprs));
    linux.assert_agree(None, &program, &checks);
}

/// The I210's and I211's semaphores, flash detection and iNVM layout,
/// against igb's `e1000_regs.h`, `e1000_defines.h` and `e1000_i210.h`
/// (cut out as definitions: the last declares functions over the
/// driver's structures).
#[test]
fn i210_semaphores_and_invm_match_linux() {
    let test = "igb i210_semaphores_and_invm_match_linux";
    let igb = "drivers/net/ethernet/intel/igb";
    let files = [
        format!("{igb}/e1000_regs.h"),
        format!("{igb}/e1000_defines.h"),
        format!("{igb}/e1000_i210.h"),
    ];
    let patterns: Vec<&str> = files.iter().map(String::as_str).collect();
    let Some(linux) = LinuxSource::extract(test, &patterns) else {
        return;
    };
    let mut checks = Vec::new();
    let mut add = |n: &str, ours: u64, c: &str| checks.push(Check::new(n, ours, c));
    add("SWSM", SWSM, "E1000_SWSM");
    add("SW_FW_SYNC", SW_FW_SYNC, "E1000_SW_FW_SYNC");
    add(
        "invm_data_reg(0)",
        invm_data_reg(0),
        "E1000_INVM_DATA_REG(0)",
    );
    add(
        "invm_data_reg(63)",
        invm_data_reg(63),
        "E1000_INVM_DATA_REG(63)",
    );
    add("INVM_SIZE", INVM_SIZE as u64, "E1000_INVM_SIZE");
    for (n, ours, c) in [
        ("SWSM_SMBI", SWSM_SMBI, "E1000_SWSM_SMBI"),
        ("SWSM_SWESMBI", SWSM_SWESMBI, "E1000_SWSM_SWESMBI"),
        ("SWFW_EEP_SM", SWFW_EEP_SM, "E1000_SWFW_EEP_SM"),
        ("SWFW_PHY0_SM", SWFW_PHY0_SM, "E1000_SWFW_PHY0_SM"),
        (
            "EECD_FLASH_DETECTED_I210",
            EECD_FLASH_DETECTED_I210,
            "E1000_EECD_FLASH_DETECTED_I210",
        ),
        (
            "INVM_UNINITIALIZED",
            INVM_UNINITIALIZED,
            "E1000_INVM_UNINITIALIZED_STRUCTURE",
        ),
        (
            "INVM_WORD_AUTOLOAD",
            INVM_WORD_AUTOLOAD,
            "E1000_INVM_WORD_AUTOLOAD_STRUCTURE",
        ),
        (
            "INVM_CSR_AUTOLOAD",
            INVM_CSR_AUTOLOAD,
            "E1000_INVM_CSR_AUTOLOAD_STRUCTURE",
        ),
        (
            "INVM_RSA_KEY_SHA256",
            INVM_RSA_KEY_SHA256,
            "E1000_INVM_RSA_KEY_SHA256_STRUCTURE",
        ),
        (
            "INVM_CSR_AUTOLOAD_DWORDS",
            INVM_CSR_AUTOLOAD_DWORDS as u32,
            "E1000_INVM_CSR_AUTOLOAD_DATA_SIZE_IN_DWORDS",
        ),
        (
            "INVM_RSA_KEY_SHA256_DWORDS",
            INVM_RSA_KEY_SHA256_DWORDS as u32,
            "E1000_INVM_RSA_KEY_SHA256_DATA_SIZE_IN_DWORDS",
        ),
        // A word-autoload record's address and data fields, read back
        // from one made the way rpmd reads them.
        (
            "word address bits 15:9",
            0x55,
            "INVM_DWORD_TO_WORD_ADDRESS(0xbeef0000u | (0x55u << 9) | 1u)",
        ),
        (
            "word data bits 31:16",
            0xbeef,
            "INVM_DWORD_TO_WORD_DATA(0xbeef0000u | (0x55u << 9) | 1u)",
        ),
    ] {
        add(n, ours as u64, c);
    }
    let texts: Vec<String> = files.iter().map(|f| linux.read(f)).collect();
    let defs = Definitions::parse(texts.iter().map(String::as_str));
    let exprs: Vec<String> = checks.iter().map(|c| c.linux.clone()).collect();
    let program = format!("{KERNEL_STUBS}{}", defs.reaching(&exprs));
    linux.assert_agree(None, &program, &checks);
}
