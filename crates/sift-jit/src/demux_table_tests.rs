use super::*;

fn value(i: u64) -> Value {
    NonZeroU64::new(i * 3 + 1).unwrap()
}

fn key<const W: usize>(i: u64) -> [u64; W] {
    let mut k = [0; W];
    k[0] = i.wrapping_mul(0x9e37_79b9);
    k[W - 1] ^= i;
    k
}

#[test]
fn layout_is_what_native_code_reads() {
    assert_eq!(std::mem::size_of::<Slot<2>>(), 24);
    assert_eq!(std::mem::size_of::<Slot<6>>(), 56);
    assert_eq!(std::mem::offset_of!(Slot<2>, value), 16);
    assert_eq!(std::mem::size_of::<NodeRef>(), 16);
    assert_eq!(std::mem::offset_of!(Header, seeds), 16);
    assert_eq!(std::mem::offset_of!(Header, keys), 32);
}

fn grows_splits_and_shrinks<const W: usize>() {
    let mut t = Table::<W>::new(KeyHash::new([7, 11]));
    let n = 20_000u64;
    for i in 0..n {
        assert_eq!(t.insert(key(i), value(i)), None);
    }
    t.check_layout().unwrap();
    assert_eq!(t.len(), n as usize);
    assert!(matches!(t.root, Node::Branch(_)));
    for i in 0..n {
        assert_eq!(t.get(&key(i)), Some(value(i)));
    }
    assert_eq!(t.get(&key(n + 1)), None);
    assert_eq!(t.insert(key(5), value(99)), Some(value(5)));
    let snapshot = t.clone();
    for i in 0..n - 3 {
        assert!(t.remove(&key(i)).is_some());
        assert_eq!(t.remove(&key(i)), None);
        if i % 997 == 0 {
            t.check_layout().unwrap();
        }
    }
    t.check_layout().unwrap();
    assert_eq!(t.len(), 3);
    assert!(matches!(t.root, Node::Leaf { .. }));
    for i in n - 3..n {
        assert_eq!(t.get(&key(i)), Some(value(i)));
    }
    // The snapshot taken before the removals is untouched.
    snapshot.check_layout().unwrap();
    assert_eq!(snapshot.len(), n as usize);
    for i in 0..n {
        let want = if i == 5 { value(99) } else { value(i) };
        assert_eq!(snapshot.get(&key(i)), Some(want));
    }
}

#[test]
fn grows_splits_and_shrinks_every_width() {
    grows_splits_and_shrinks::<1>();
    grows_splits_and_shrinks::<2>();
    grows_splits_and_shrinks::<6>();
}

#[test]
fn random_updates_against_a_map() {
    // Small key space: many collisions in leaves, clusters that wrap, removals inside them.
    let mut t = Table::<2>::new(KeyHash::random());
    let mut model = std::collections::HashMap::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for step in 0..60_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = [x % 700, (x >> 32) % 3];
        if x.is_multiple_of(3) {
            assert_eq!(t.remove(&k), model.remove(&k));
        } else {
            assert_eq!(t.insert(k, value(step)), model.insert(k, value(step)));
        }
        if step % 5000 == 0 {
            t.check_layout().unwrap();
        }
    }
    t.check_layout().unwrap();
    assert_eq!(t.len(), model.len());
    for (k, v) in &model {
        assert_eq!(t.get(k), Some(*v));
    }
    let mut seen = 0;
    t.for_each(|k, v| {
        assert_eq!(model.get(k), Some(&v));
        seen += 1;
    });
    assert_eq!(seen, model.len());
}

#[test]
fn zero_keys_are_keys() {
    let mut t = Table::<2>::new(KeyHash::new([0, 0]));
    assert_eq!(t.get(&[0, 0]), None);
    t.insert([0, 0], value(1));
    assert_eq!(t.get(&[0, 0]), Some(value(1)));
    assert_eq!(t.remove(&[0, 0]), Some(value(1)));
    assert_eq!(t.get(&[0, 0]), None);
    t.check_layout().unwrap();
}
