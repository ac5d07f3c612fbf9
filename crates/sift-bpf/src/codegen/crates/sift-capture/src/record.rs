//! One captured packet ([`Record`]) and its time stamp ([`Timestamp`]).

/// Resolution of time stamps in a capture file: one unit is 10^-n or 2^-n seconds.
///
/// pcap files are either [`TsResolution::MICRO`] or [`TsResolution::NANO`];
/// pcapng interfaces may declare any power of 10 up to 10^-19 or of 2 up to 2^-63
/// (`if_tsresol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TsResolution {
    /// One unit is 10^-n seconds (n <= 19).
    Decimal(u8),
    /// One unit is 2^-n seconds (n <= 63).
    Binary(u8),
}

impl TsResolution {
    /// Microseconds (pcap's classic resolution, pcapng's default).
    pub const MICRO: TsResolution = TsResolution::Decimal(6);
    /// Nanoseconds.
    pub const NANO: TsResolution = TsResolution::Decimal(9);

    /// Units per second, or `None` if the exponent is out of range (10^20 and
    /// beyond, 2^64 and beyond).
    pub fn checked_units_per_second(self) -> Option<u64> {
        match self {
            TsResolution::Decimal(n) if n <= 19 => Some(10u64.pow(u32::from(n))),
            TsResolution::Binary(n) if n <= 63 => Some(1u64 << n),
            _ => None,
        }
    }

    /// Units per second. Out-of-range exponents (which readers never produce)
    /// saturate to `u64::MAX`.
    pub fn units_per_second(self) -> u64 {
        self.checked_units_per_second().unwrap_or(u64::MAX)
    }
}

/// When a packet was captured, exactly as the file recorded it.
///
/// The seconds and the sub-second fraction are kept in the file's own
/// resolution, so that writing a record back out reproduces the original
/// values bit for bit (even out-of-range fractions such as a pcap `ts_usec`
/// of 1 500 000 are preserved, as libpcap does). Use [`Timestamp::secs`] and
/// [`Timestamp::nanos`] for a normalised view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timestamp {
    raw_secs: i64,
    raw_frac: u64,
    resolution: TsResolution,
}

impl Timestamp {
    /// A time stamp in nanosecond resolution. `nanos` may exceed 999 999 999
    /// (it is then carried into the seconds by [`Timestamp::secs`]).
    pub fn new(secs: i64, nanos: u32) -> Timestamp {
        Timestamp::from_raw(secs, u64::from(nanos), TsResolution::NANO)
    }

    /// A time stamp from the fields as a file stores them: whole seconds, and a
    /// fraction counted in units of `resolution`.
    pub fn from_raw(secs: i64, frac: u64, resolution: TsResolution) -> Timestamp {
        Timestamp {
            raw_secs: secs,
            raw_frac: frac,
            resolution,
        }
    }

    /// The seconds field as stored in the file (not normalised).
    pub fn raw_secs(&self) -> i64 {
        self.raw_secs
    }

    /// The fraction as stored in the file, in units of [`Timestamp::resolution`].
    pub fn raw_frac(&self) -> u64 {
        self.raw_frac
    }

    /// The resolution of [`Timestamp::raw_frac`].
    pub fn resolution(&self) -> TsResolution {
        self.resolution
    }

    /// Whole seconds since the Unix epoch, with any fraction of a second or
    /// more carried over from the fraction field.
    pub fn secs(&self) -> i64 {
        let units = self.resolution.units_per_second();
        self.raw_secs.wrapping_add((self.raw_frac / units) as i64)
    }

    /// Nanoseconds past [`Timestamp::secs`] (always below 10^9), truncated if the
    /// file's resolution is finer than a nanosecond.
    pub fn nanos(&self) -> u32 {
        let units = self.resolution.units_per_second();
        let frac = u128::from(self.raw_frac % units);
        (frac * 1_000_000_000 / u128::from(units)) as u32
    }

    /// The fraction converted to another resolution the way libpcap does
    /// when a program asks for a different time stamp precision than the
    /// file has: decimal resolutions are scaled by a power of ten (truncating
    /// when scaling down), binary ones by `frac * target / units`. The
    /// seconds are not touched and out-of-range fractions are scaled as they
    /// are, so the result matches what tcpdump writes.
    pub fn frac_in(&self, target: TsResolution) -> u64 {
        if self.resolution == target {
            return self.raw_frac;
        }
        let from = self.resolution.units_per_second();
        let to = target.units_per_second();
        match self.resolution {
            TsResolution::Decimal(_) if from > to => self.raw_frac / (from / to),
            TsResolution::Decimal(_) if matches!(target, TsResolution::Decimal(_)) => {
                self.raw_frac.wrapping_mul(to / from)
            }
            _ => (u128::from(self.raw_frac) * u128::from(to) / u128::from(from)) as u64,
        }
    }

    /// `(seconds, microseconds)` as libpcap hands them to tcpdump when it
    /// reads the file at microsecond precision (the default).
    pub fn to_micros(&self) -> (i64, u64) {
        (self.raw_secs, self.frac_in(TsResolution::MICRO))
    }

    /// `(seconds, nanoseconds)` as libpcap hands them to a program reading the
    /// file at nanosecond precision.
    pub fn to_nanos(&self) -> (i64, u64) {
        (self.raw_secs, self.frac_in(TsResolution::NANO))
    }
}

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// When the packet was captured.
    pub timestamp: Timestamp,
    /// Length of the packet on the wire (may be larger than the captured data).
    pub wire_len: u32,
    /// Link-layer header type (`LINKTYPE_*` value) of the packet's interface,
    /// without the FCS bits of the pcap header's link-type field.
    pub linktype: u32,
    /// Index of the packet's interface within its pcapng section (0 for pcap).
    pub interface_id: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

impl Record {
    /// Captured length: the number of bytes in [`Record::data`].
    pub fn caplen(&self) -> u32 {
        // Readers never produce more than u32::MAX bytes of packet data.
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(TsResolution::MICRO.units_per_second(), 1_000_000);
        assert_eq!(TsResolution::NANO.units_per_second(), 1_000_000_000);
        assert_eq!(
            TsResolution::Decimal(19).checked_units_per_second(),
            Some(10_000_000_000_000_000_000)
        );
        assert_eq!(TsResolution::Decimal(20).checked_units_per_second(), None);
        assert_eq!(TsResolution::Binary(63).units_per_second(), 1 << 63);
        assert_eq!(TsResolution::Binary(64).checked_units_per_second(), None);
    }

    #[test]
    fn normalised_view() {
        let t = Timestamp::from_raw(10, 1_500_000, TsResolution::MICRO);
        assert_eq!(t.secs(), 11);
        assert_eq!(t.nanos(), 500_000_000);
        assert_eq!(t.to_micros(), (10, 1_500_000));
        let t = Timestamp::from_raw(1, 1 << 19, TsResolution::Binary(20));
        assert_eq!(t.nanos(), 500_000_000);
        let t = Timestamp::new(5, 123_456_789);
        assert_eq!(t.to_micros(), (5, 123_456));
        assert_eq!(t.to_nanos(), (5, 123_456_789));
    }

    #[test]
    fn libpcap_scaling() {
        // 2^-20 resolution: 12345 units = 11773.2 us, truncated.
        let t = Timestamp::from_raw(1000, 12345, TsResolution::Binary(20));
        assert_eq!(t.to_micros(), (1000, 11773));
        // Milliseconds scale up by 1000.
        let t = Timestamp::from_raw(1000, 123, TsResolution::Decimal(3));
        assert_eq!(t.to_micros(), (1000, 123_000));
        // Micro to nano.
        let t = Timestamp::from_raw(1, 7, TsResolution::MICRO);
        assert_eq!(t.to_nanos(), (1, 7000));
        // Very fine binary resolution does not overflow.
        let t = Timestamp::from_raw(0, (1 << 63) - 1, TsResolution::Binary(63));
        assert_eq!(t.to_micros(), (0, 999_999));
    }

    #[test]
    fn caplen_is_data_len() {
        let r = Record {
            timestamp: Timestamp::new(0, 0),
            wire_len: 100,
            linktype: 1,
            interface_id: 0,
            data: vec![0; 42],
        };
        assert_eq!(r.caplen(), 42);
    }
}
