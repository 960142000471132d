//! What the model tests share.
use rpmd_igb::model::IgbModel;
use rpmd_igb::IgbPort;
use rpmd_pmd::{Mempool, Port, Queues};

/// Stops the port and checks every mbuf is home and no DMA strayed.
pub fn finish(model: &IgbModel, pool: &Mempool, mut port: IgbPort, q: Queues) {
    port.stop().unwrap();
    drop(q);
    drop(port);
    assert_eq!(pool.available(), pool.size(), "every mbuf home");
    assert_eq!(model.violations(), Vec::<String>::new());
}
