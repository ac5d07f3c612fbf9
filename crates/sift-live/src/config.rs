//! What to capture and with how much buffer: a [`Config`] given to [`crate::Capture::open`].

/// libpcap's largest snapshot length (`MAXIMUM_SNAPLEN`), also what it uses for 0.
pub const MAXIMUM_SNAPLEN: u32 = 262_144;

/// The settings of a live capture. Built with [`Config::new`] and the setters; every value is
/// usable (out-of-range ones are adjusted as documented on each setter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub(crate) interface: String,
    pub(crate) snaplen: u32,
    pub(crate) promiscuous: bool,
    pub(crate) block_size: usize,
    pub(crate) block_count: usize,
    pub(crate) block_timeout_ms: u32,
}

impl Config {
    /// Capture on `interface` with a snapshot length of 262144, promiscuous mode, four 1 MiB
    /// ring blocks and a 100 ms block timeout.
    pub fn new(interface: impl Into<String>) -> Config {
        Config {
            interface: interface.into(),
            snaplen: MAXIMUM_SNAPLEN,
            promiscuous: true,
            block_size: 1 << 20,
            block_count: 4,
            block_timeout_ms: 100,
        }
    }

    /// Bytes kept of each packet. 0 and values above 262144 mean 262144, as in libpcap. The
    /// filter's return value truncates further (sift's filters return the snapshot length they
    /// were compiled with, so compile them with this value).
    pub fn snaplen(mut self, snaplen: u32) -> Config {
        self.snaplen = if snaplen == 0 || snaplen > MAXIMUM_SNAPLEN {
            MAXIMUM_SNAPLEN
        } else {
            snaplen
        };
        self
    }

    /// Whether to put the interface in promiscuous mode (default on, as tcpdump).
    pub fn promiscuous(mut self, on: bool) -> Config {
        self.promiscuous = on;
        self
    }

    /// The ring's geometry: `block_count` blocks (at least 1) of `block_size` bytes. The block
    /// size is rounded up to a power-of-two number of pages large enough for one packet of the
    /// snapshot length with its headers, since a packet never spans blocks.
    pub fn buffer(mut self, block_size: usize, block_count: usize) -> Config {
        self.block_size = block_size;
        self.block_count = block_count.max(1);
        self
    }

    /// Milliseconds after which the kernel hands over a block that is not full, so that
    /// low-rate traffic is delivered (at least 1).
    pub fn block_timeout_ms(mut self, ms: u32) -> Config {
        self.block_timeout_ms = ms.max(1);
        self
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The snapshot length.
    pub fn snapshot_length(&self) -> u32 {
        self.snaplen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snaplen_zero_and_huge_mean_the_maximum() {
        assert_eq!(
            Config::new("lo").snaplen(0).snapshot_length(),
            MAXIMUM_SNAPLEN
        );
        assert_eq!(
            Config::new("lo").snaplen(u32::MAX).snapshot_length(),
            MAXIMUM_SNAPLEN
        );
        assert_eq!(Config::new("lo").snaplen(96).snapshot_length(), 96);
    }

    #[test]
    fn degenerate_buffers_are_adjusted() {
        let c = Config::new("lo").buffer(1, 0).block_timeout_ms(0);
        assert_eq!((c.block_count, c.block_timeout_ms), (1, 1));
    }
}
