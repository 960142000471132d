//! Byte-order types for hardware and ring layouts.
//!
//! A field of a `#[repr(C)]` layout that the device reads or writes in a
//! fixed byte order has one of these types, so that the order is part of
//! the layout and cannot be forgotten at a use: virtio rings are little
//! endian (`Le*`), mlx4's structures big endian (`Be*`). Each is a
//! `#[repr(transparent)]` wrapper of the integer of its width, with the
//! same size and alignment; `new` converts from host order and `get` back.
macro_rules! endian {
    ($($name:ident $t:ty, $to:ident, $from:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name($t);

        impl $name {
            /// From a host-order value.
            #[inline(always)]
            pub const fn new(v: $t) -> Self {
                $name(v.$to())
            }

            /// The host-order value.
            #[inline(always)]
            pub const fn get(self) -> $t {
                <$t>::$from(self.0)
            }
        }

        impl From<$t> for $name {
            fn from(v: $t) -> Self {
                Self::new(v)
            }
        }

        impl From<$name> for $t {
            fn from(v: $name) -> $t {
                v.get()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:#x}", self.get())
            }
        }

        const _: () = assert!(
            size_of::<$name>() == size_of::<$t>() && align_of::<$name>() == align_of::<$t>()
        );
    )*};
}

endian! {
    Le16 u16, to_le, from_le, "A little-endian `u16`.";
    Le32 u32, to_le, from_le, "A little-endian `u32`.";
    Le64 u64, to_le, from_le, "A little-endian `u64`.";
    Be16 u16, to_be, from_be, "A big-endian `u16`.";
    Be32 u32, to_be, from_be, "A big-endian `u32`.";
    Be64 u64, to_be, from_be, "A big-endian `u64`.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_bytes_are_in_the_named_order() {
        let le = Le32::new(0x0102_0304);
        let be = Be32::new(0x0102_0304);
        // What sits in memory: the stored integer's bytes.
        assert_eq!(le.0.to_ne_bytes(), [4, 3, 2, 1]);
        assert_eq!(be.0.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!(le.get(), 0x0102_0304);
        assert_eq!(be.get(), 0x0102_0304);
        assert_eq!(u64::from(Le64::new(7)), 7);
        assert_eq!(Be16::from(0x1234).get(), 0x1234);
    }
}
