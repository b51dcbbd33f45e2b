/* Fiber context switch for the KLineage CUDA emulator (x86-64 System V).
 *
 * void klemu_switch(void **save_sp, void *next_sp)
 *   Saves the callee-saved registers, MXCSR and the x87 control word on the current stack,
 *   stores the stack pointer in *save_sp, loads next_sp and restores the same set from it.
 *   Everything else is caller-saved under the ABI, so this is a complete switch.
 *
 * klemu_fiber_start: first "return address" of a fresh fiber stack; the initial frame puts the
 *   fiber pointer in r12 and the entry function in r13.
 */
    .text
    .globl klemu_switch
    .type klemu_switch, @function
klemu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size klemu_switch, .-klemu_switch

    .globl klemu_fiber_start
    .type klemu_fiber_start, @function
klemu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size klemu_fiber_start, .-klemu_fiber_start

    .section .note.GNU-stack,"",@progbits
