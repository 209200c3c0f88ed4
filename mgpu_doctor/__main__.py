from mgpu_doctor.cli import console_main

console_main()
