// tests/data/fortunes_sample.h — a slice of real text (Debian `fortunes`, file "computers", BSD
// licence) for tokenizer and prepare tests, embedded so that the tests do not depend on the
// package being installed. Documents are separated by lines holding only '%'.
#pragma once

namespace moe4d::test {

inline constexpr const char* kFortunesSample = R"FORTUNES(!07/11 PDP a ni deppart m'I  !pleH
%
1: No code table for op: ++post
%
... A booming voice says, "Wrong, cretin!", and you notice that you
have turned into a pile of dust.
%
A bug in the code is worth two in the documentation.
%
A bug in the hand is better than one as yet undetected.
%
A complex system that works is invariably found to have evolved from a
simple system that works.
%
[A computer is] like an Old Testament god, with a lot of rules and no mercy.
		-- Joseph Campbell
%
A computer lets you make more mistakes faster than any other invention,
with the possible exceptions of handguns and Tequilla.
		-- Mitch Ratcliffe
%
A computer scientist is someone who fixes things that aren't broken.
%
A computer without COBOL and Fortran is like a piece of chocolate cake
without ketchup and mustard.
%
A CONS is an object which cares.
		-- Bernie Greenberg.
%
A debugged program is one for which you have not yet found the conditions
that make it fail.
		-- Jerry Ogdin
%
A formal parsing algorithm should not always be used.
		-- D. Gries
%
A Fortran compiler is the hobgoblin of little minis.
%
A hacker does for love what others would not do for money.
%
A language that doesn't affect the way you think about programming is
not worth knowing.
%
A language that doesn't have everything is actually easier to program
in than some that do.
		-- Dennis M. Ritchie
%
A large number of installed systems work by fiat.  That is, they work
by being declared to work.
		-- Anatol Holt
%
A LISP programmer knows the value of everything, but the cost of nothing.
		-- Alan Perlis
%
A list is only as strong as its weakest link.
		-- Don Knuth
%
A modem is a baudy house.
%
A nasty looking dwarf throws a knife at you.
%
	A novice was trying to fix a broken lisp machine by turning the
power off and on.  Knight, seeing what the student was doing spoke sternly,
"You cannot fix a machine by just power-cycling it with no understanding
of what is going wrong."  Knight turned the machine off and on.  The
machine worked.
%
A person who is more than casually interested in computers should be well
schooled in machine language, since it is a fundamental part of a computer.
		-- Donald Knuth
%
A programming language is low level when its programs require attention
to the irrelevant.
%
A recent study has found that concentrating on difficult off-screen
objects, such as the faces of loved ones, causes eye strain in computer
scientists.  Researchers into the phenomenon cite the added concentration
needed to "make sense" of such unnatural three dimensional objects.
%
A rolling disk gathers no MOS.
%
A successful [software] tool is one that was used to do something
undreamed of by its author.
		-- S. C. Johnson
%
A well-used door needs no oil on its hinges.
A swift-flowing steam does not grow stagnant.
Neither sound nor thoughts can travel through a vacuum.
Software rots if not used.

These are great mysteries.
		-- Geoffrey James, "The Tao of Programming"
%
A year spent in artificial intelligence is enough to make one believe in God.
%
About the use of language: it is impossible to sharpen a pencil with a blunt
ax.  It is equally vain to try to do it with ten blunt axes instead.
		-- Edsger Dijkstra
%
Adding features does not necessarily increase functionality -- it just
makes the manuals thicker.
%
Adding manpower to a late software project makes it later.
		-- F. Brooks, "The Mythical Man-Month"
%
Whenever one person is found adequate to the discharge of a duty by
close application thereto, it is worse execute by two persons and
scarcely done at all if three or more are employed therein.
		-- George Washington, 1732-1799
%
Alan Turing thought about criteria to settle the question of whether
machines can think, a question of which we now know that it is about
as relevant as the question of whether submarines can swim.
		-- Dijkstra
%
Algol-60 surely must be regarded as the most important programming language
yet developed.
		-- T. Cheatham
%
All constants are variables.
%
All parts should go together without forcing.  You must remember that the parts
you are reassembling were disassembled by you.  Therefore, if you can't get
them together again, there must be a reason.  By all means, do not use a hammer.
		-- IBM maintenance manual, 1925
%
All programmers are playwrights and all computers are lousy actors.
%
"... all the good computer designs are bootlegged; the formally planned
products, if they are built at all, are dogs!"
		-- David E. Lundstrom, "A Few Good Men From Univac",
		   MIT Press, 1987
%
All the simple programs have been written.
%
All your files have been destroyed (sorry).  Paul.
%
Almost anything derogatory you could say about today's software design
would be accurate.
		-- K. E. Iverson
%
An Ada exception is when a routine gets in trouble and says
'Beam me up, Scotty'.
%
An adequate bootstrap is a contradiction in terms.
%
An algorithm must be seen to be believed.
		-- D. E. Knuth
%
An elephant is a mouse with an operating system.
%
An engineer is someone who does list processing in FORTRAN.
%
And it should be the law: If you use the word `paradigm' without knowing
what the dictionary says it means, you go to jail.  No exceptions.
		-- David Jones
%
And on the seventh day, He exited from append mode.
%
Another megabytes the dust.
%
Any given program will expand to fill available memory.
%
Any given program, when running, is obsolete.
%
Any program which runs right is obsolete.
%
Any programming language is at its best before it is implemented and used.
%
Any sufficiently advanced bug is indistinguishable from a feature.
		-- Rich Kulawiec
%
Anyone who has attended a USENIX conference in a fancy hotel can tell you
that a sentence like "You're one of those computer people, aren't you?"
is roughly equivalent to "Look, another amazingly mobile form of slime
mold!" in the mouth of a hotel cocktail waitress.
		-- Elizabeth Zwicky
%
APL hackers do it in the quad.
%
APL is a mistake, carried through to perfection.  It is the language of the
future for the programming techniques of the past: it creates a new generation
of coding bums.
		-- Edsger W. Dijkstra, SIGPLAN Notices, Volume 17, Number 5
%
APL is a natural extension of assembler language programming;
...and is best for educational purposes.
		-- A. Perlis
%
APL is a write-only language.  I can write programs in APL, but I can't
read any of them.
		-- Roy Keir
%
Are we running light with overbyte?
%
Around computers it is difficult to find the correct unit of time to
measure progress.  Some cathedrals took a century to complete.  Can you
imagine the grandeur and scope of a program that would take as long?
		-- Epigrams in Programming, ACM SIGPLAN Sept. 1982
%
As a computer, I find your faith in technology amusing.
%
As far as we know, our computer has never had an undetected error.
		-- Weisert
%
As in certain cults it is possible to kill a process if you know its true name.
		-- Ken Thompson and Dennis M. Ritchie
%
As long as there are ill-defined goals, bizarre bugs, and unrealistic
schedules, there will be Real Programmers willing to jump in and Solve
The Problem, saving the documentation for later.
%
As of next Thursday, UNIX will be flushed in favor of TOPS-10.
Please update your programs.
%
As of next Tuesday, C will be flushed in favor of COBOL.
Please update your programs.
%
As of next week, passwords will be entered in Morse code.
%
As part of the conversion, computer specialists rewrote 1,500 programs;
a process that traditionally requires some debugging.
		-- USA Today, referring to the Internal Revenue Service
		   conversion to a new computer system.
%
As the trials of life continue to take their toll, remember that there
is always a future in Computer Maintenance.
		-- National Lampoon, "Deteriorata"
%
As Will Rogers would have said, "There is no such things as a free variable."
%
ASCII a stupid question, you get an EBCDIC answer.
%
ASHes to ASHes, DOS to DOS.
%
Ask not for whom the <CONTROL-G> tolls.
%
Assembly language experience is [important] for the maturity
and understanding of how computers work that it provides.
		-- D. Gries
%
Asynchronous inputs are at the root of our race problems.
		-- D. Winker and F. Prosser
%
At first sight, the idea of any rules or principles being superimposed on
the creative mind seems more likely to hinder than to help, but this is
quite untrue in practice.  Disciplined thinking focuses inspiration rather
than blinkers it.
		-- G. L. Glegg, "The Design of Design"
%
At Group L, Stoffel oversees six first-rate programmers, a managerial
challenge roughly comparable to herding cats.
		-- The Washington Post Magazine, 9 June, 1985
%
At the source of every error which is blamed on the computer you will find
at least two human errors, including the error of blaming it on the computer.
%
Avoid strange women and temporary variables.
%
Basic is a high level languish.  APL is a high level anguish.
%
BASIC is the Computer Science equivalent of `Scientific Creationism'.
%
BASIC is to computer programming as QWERTY is to typing.
		-- Seymour Papert
%
Be careful when a loop exits to the same place from side and bottom.
%
Behind every great computer sits a skinny little geek.
%
Bell Labs Unix -- Reach out and grep someone.
%
Beware of bugs in the above code; I have only proved it correct, not tried it.
		-- Donald Knuth
%
Beware of Programmers who carry screwdrivers.
		-- Leonard Brandwein
%
Beware of the Turing Tar-pit in which everything is possible but nothing of
interest is easy.
%
Beware the new TTY code!
%
Blinding speed can compensate for a lot of deficiencies.
		-- David Nichols
%
Both models are identical in performance, functional operation, and
interface circuit details.  The two models, however, are not compatible
on the same communications line connection.
		-- Bell System Technical Reference
%
Brain fried -- Core dumped
%
Breadth-first search is the bulldozer of science.
		-- Randy Goebel
%
Bringing computers into the home won't change either one, but may
revitalize the corner saloon.
%
Build a system that even a fool can use and only a fool will want to use it.
%
Building translators is good clean fun.
		-- T. Cheatham
%
Bus error -- driver executed.
%
Bus error -- please leave by the rear door.
%
But in our enthusiasm, we could not resist a radical overhaul of the
system, in which all of its major weaknesses have been exposed,
analyzed, and replaced with new weaknesses.
		-- Bruce Leverett, "Register Allocation in Optimizing Compilers"
%
"But what we need to know is, do people want nasally-insertable computers?"
%
By long-standing tradition, I take this opportunity to savage other
designers in the thin disguise of good, clean fun.
		-- P. J. Plauger, "Computer Language", 1988, April
		   Fool's column.
%
BYTE editors are people who separate the wheat from the chaff, and then
carefully print the chaff.
%
Byte your tongue.
%
C Code.
C Code Run.
Run, Code, RUN!
	PLEASE!!!!
%
C for yourself.
%
C makes it easy for you to shoot yourself in the foot.  C++ makes that
harder, but when you do, it blows away your whole leg.
		-- Bjarne Stroustrup
%
C'est magnifique, mais ce n'est pas l'Informatique.
		-- Bosquet [on seeing the IBM 4341]
%
C++ is the best example of second-system effect since OS/360.
%
Calm down, it's *____only* ones and zeroes.
%
Can't open /usr/share/games/fortunes/fortunes.  Lid stuck on cookie jar.
%
Can't open /usr/share/games/fortunes/fortunes.dat.
%
CChheecckk yyoouurr dduupplleexx sswwiittcchh..
%
CCI Power 6/40: one board, a megabyte of cache, and an attitude...
%
Center meeting at 4pm in 2C-543.
%
Civilization, as we know it, will end sometime this evening.
See SYSNOTE tomorrow for more information.
%
COBOL is for morons.
		-- E. W. Dijkstra
%
Cobol programmers are down in the dumps.
%
Coding is easy;  All you do is sit staring at a terminal until the drops
of blood form on your forehead.
%
)FORTUNES";

}  // namespace moe4d::test
