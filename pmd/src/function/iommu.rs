//! Device DMA for device models: reads and writes through a
//! [`ModelIommu`], refused outside what the driver mapped, as an IOMMU
//! would refuse a real device's.
#![allow(unsafe_code)]

use super::ModelIommu;

impl ModelIommu {
    /// Device DMA read of `out.len()` bytes at IOVA `a`; false (nothing
    /// read) if they are not all mapped.
    pub fn read(&self, a: u64, out: &mut [u8]) -> bool {
        let Some(p) = self.translate(a, out.len()) else {
            return false;
        };
        // SAFETY: `p..p+len` lies in a region mapped for the device, which
        // lives while its mapping does (drivers drop the mapping before
        // the memory); the copy makes no reference into it, whose bytes
        // the driver may be changing (a device's view of them is racy by
        // nature).
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        true
    }

    /// Device DMA write of `data` at IOVA `a`; false (nothing written) if
    /// they are not all mapped.
    pub fn write(&self, a: u64, data: &[u8]) -> bool {
        let Some(p) = self.translate(a, data.len()) else {
            return false;
        };
        // SAFETY: as for `read`; the driver mapped these bytes for the
        // device to write.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        true
    }
}
