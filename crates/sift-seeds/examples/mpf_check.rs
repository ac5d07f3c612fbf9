fn main() {
    let text = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    match sift_seeds::mpf::parse(&text) {
        Ok(p) => println!("{:?}", p.insns()),
        Err(e) => println!("{}", e.render(&text)),
    }
}
