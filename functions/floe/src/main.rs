//! `floe`: run the pipeline locally, make a demo, manage tables.

mod cli;
mod demo;
mod output;
mod run;
mod s3tables;
mod tables;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    output::init_logging(&cli.log, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(source) = std::error::Error::source(&e) {
                eprintln!("  caused by: {source}");
            }
            std::process::ExitCode::from(if e.kind() == floe_core::ErrorKind::Config {
                2
            } else {
                1
            })
        }
    }
}
