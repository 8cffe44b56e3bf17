import Atoll
import Foundation

// The projections the projection tests use: DoggoDB's `Profile` as Realm's SwiftUI docs write
// it, and realm-swift's reference example `PersonProjection` on its own person class (named
// `Friend` here, since `Person` is DoggoDB's).

/// DoggoDB's projection of a `Person`, as the docs write it.
class Profile: Projection<Person> {
    @Projected(\Person.firstName) var firstName // Passthrough from original object
    @Projected(\Person.lastName.localizedCapitalized.first) var lastNameInitial // Access and transform the original property
    @Projected(\Person.personId) var personId
    @Projected(\Person.businessUnit) var businessUnit
    @Projected(\Person.profileImageUrl) var profileImageUrl
    @Projected(\Person.dogs) var dogs
}

/// A `Person` projection with renamed properties and the dogs mapped to their names.
class PersonCard: Projection<Person> {
    @Projected(\Person.firstName) var givenName
    @Projected(\Person.lastName) var familyName
    @Projected(\Person.dogs.projectTo.name) var dogNames: ProjectedCollection<String>
}

/// A projection of a list both as it is and mapped through its objects.
class DogOwnerView: Projection<Person> {
    @Projected(\Person.dogs) var dogs
    @Projected(\Person.dogs.projectTo.name) var dogNames: ProjectedCollection<String>
}

/// realm-swift's `Person` of its `Projection` reference.
class Friend: Object {
    @Persisted(primaryKey: true) var _id: ObjectId
    @Persisted var firstName = ""
    @Persisted var lastName = ""
    @Persisted var address: Address?
    @Persisted var friends: List<Friend>
    @Persisted var reviews: List<String>
    @Persisted var closeFriends: MutableSet<Friend>
}

/// realm-swift's `PersonProjection`, on `Friend`.
class FriendProjection: Projection<Friend> {
    @Projected(\Friend.firstName) var firstName
    @Projected(\Friend.lastName.localizedUppercase) var lastNameCaps
    @Projected(\Friend.address?.city) var homeCity
    @Projected(\Friend.friends.projectTo.firstName) var friendsFirstName: ProjectedCollection<String>
}

/// A projection mapping a set, and an embedded object passed through.
class FriendCircle: Projection<Friend>, ObjectKeyIdentifiable {
    @Projected(\Friend.closeFriends.projectTo.firstName) var closeFriendNames: ProjectedCollection<String>
    @Projected(\Friend.address) var address
    @Projected(\Friend.address?.city) var city
}
