//! Prints the IR lifted from a CSPF (`.cspf`), DPF (`.dpf`) or MPF (`.mpf`; with its classic BPF
//! expansion) file, or explains why it does not parse or lift: `cargo run -p sift-seeds --example lift_ir -- tests/programs/figure11.cspf`.

use std::process::ExitCode;

use sift_seeds::{cspf, dpf, mpf};

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: lift_ir FILE.cspf|FILE.dpf|FILE.mpf");
        return ExitCode::FAILURE;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if path.ends_with(".cspf") {
        cspf::parse(&text)
            .map(|p| format!("{p}\n\n{}", cspf::lift(&p)))
            .map_err(|e| e.render(&text))
    } else if path.ends_with(".mpf") {
        mpf::parse(&text)
            .map_err(|e| e.render(&text))
            .and_then(|p| {
                let classic = mpf::to_classic(&p, mpf::ACCEPT_ALL).map_err(|e| e.render(&text))?;
                let listing = sift_bpf::disasm::disassemble(&classic.to_program());
                Ok(format!(
                    "{listing}
{}",
                    sift_bpf::lift(&classic)
                ))
            })
    } else {
        dpf::parse(&text)
            .map(|f| {
                let atoms: Vec<String> = f.atoms().iter().map(|a| a.to_string()).collect();
                format!("{}\n\n{}", atoms.join("\n"), dpf::lift(&f))
            })
            .map_err(|e| e.render(&text))
    };
    match result {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("{path}:{msg}");
            ExitCode::FAILURE
        }
    }
}
