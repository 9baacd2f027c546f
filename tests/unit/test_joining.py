"""What keeps a running node from leaving its cluster for another, in the words its owner reads."""

from frost_core.node.joining import what_holds_back


def test_nothing_holds_a_node_whose_work_is_its_own_and_here():
    assert what_holds_back(guests=0, owed=0, units_out=0, gangs=0) == ""


def test_each_tie_says_what_would_be_stranded_and_what_to_do_about_it():
    said = what_holds_back(guests=1, owed=2, units_out=3, gangs=1)
    assert said == ("1 guest of other peers' assignments runs here (evict: e, or `frost-tui evict`); "
                    "2 outcomes computed here are still owed to masters of this cluster (they are delivered when "
                    "those masters answer); "
                    "3 units of your assignments run on peers (let them finish, or cancel their assignments); "
                    "1 gang of yours runs (let it finish, or cancel it)")


def test_counts_agree_with_their_verbs():
    assert what_holds_back(guests=2, owed=1, units_out=1, gangs=2) == (
        "2 guests of other peers' assignments run here (evict: e, or `frost-tui evict`); "
        "1 outcome computed here is still owed to masters of this cluster (they are delivered when those masters "
        "answer); 1 unit of your assignments runs on peers (let it finish, or cancel its assignment); "
        "2 gangs of yours run (let them finish, or cancel them)")
